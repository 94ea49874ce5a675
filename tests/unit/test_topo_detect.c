/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Topology detection from recorded sysfs trees (tests/data/sysfs/, see the
 * scripts there): the XML is compared byte for byte with
 * tests/data/sysfs/<tree>.expected.xml (set MC_T_REGEN=1 to rewrite them),
 * then the system built from it must give the expected path types.
 * GPUs come from the fake NVML (tests/common/fake_nvml.c, configured through
 * FAKE_NVML_*); every other case points MESHCCL_NVML_LIBRARY at a missing
 * file so that a real NVML on the test host changes nothing.
 */
#include "mc_test.h"

#include "topo/topo.h"
#include "topo/topo_cuda.h"
#include "topo/topo_detect.h"
#include "topo/topo_nvml.h"
#include "topo/topo_xml.h"

#include "params.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#define HOST_HASH 0x1234abcdULL
#define NO_NVML   "/nonexistent/libnvidia-ml.so.1"

/* The 2-socket tree's GPUs as NVML reports them (fake_nvml.c syntax).
 * GPU 0 (sm90, 18 links): 4 links to the NVSwitch-class 0000:83:00.0 that
 * sysfs shows, 2 to GPU 1, 1 to an NVSwitch sysfs does not show, 1 whose
 * remote bus id is empty, 1 whose remote end NVML cannot give, 1 inactive.
 * GPU 1 (sm80: links 0-11 only): 2 to GPU 0, 2 to the NVSwitch; link 12 is
 * beyond NCCL's 12 links of sm80 and must be ignored. */
#define FAKE_GPUS                                                                                  \
  "00000000:05:00.0,90,00000000:83:00.0/00000000:83:00.0/-/00000000:82:00.0/00000000:83:00.0/"     \
  "00000000:82:00.0/00000000:C4:00.0/!/?/00000000:83:00.0;"                                        \
  "00000000:82:00.0,80,00000000:05:00.0/00000000:05:00.0/00000000:83:00.0/-/00000000:83:00.0/-/-/" \
  "-/-/-/-/-/00000000:05:00.0"

static void use_nvml(const char *library, const char *gpus, bool init_fails)
{
  mc_param_set_for_tests(MC_P_NVML_LIBRARY, library);
  mc_param_set_for_tests(MC_P_CUDA_LIBRARY, NO_NVML); /* no CUDA driver: gdr 0 */
  if (gpus != NULL) {
    setenv("FAKE_NVML_GPUS", gpus, 1);
  } else {
    unsetenv("FAKE_NVML_GPUS");
  }
  if (init_fails) {
    setenv("FAKE_NVML_INIT_FAIL", "1", 1);
  } else {
    unsetenv("FAKE_NVML_INIT_FAIL");
  }
}

static char *dump_xml(const struct mc_xml *xml)
{
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);

  if (f == NULL) {
    return NULL;
  }
  if (mc_xml_dump(xml, f) != ncclSuccess) {
    fclose(f);
    free(buf);
    return NULL;
  }
  fclose(f);
  return buf;
}

static void expect_xml(const struct mc_xml *xml, const char *name)
{
  char rel[256];
  char *got = dump_xml(xml);
  const char *path;

  snprintf(rel, sizeof(rel), "sysfs/%s.expected.xml", name);
  path = mc_t_data(rel);
  MC_T_TRUE(got != NULL);
  if (getenv("MC_T_REGEN") != NULL) {
    mc_t_write_file(path, got);
  }
  if (strcmp(got, mc_t_read_file(path)) != 0) {
    fprintf(stderr, "# got:\n%s", got);
    free(got);
    MC_T_FAIL("detected XML differs from %s", path);
  }
  free(got);
}

/* Whether detect_ranks' ranks had their devices named by the job (false:
 * compute devices whatever NVML reports). */
static bool g_named_devices = true;

static struct mc_xml *detect_ranks(const char *tree, int n_ranks, const int *numa)
{
  struct mc_xml *fused = NULL;

  MC_T_OK(mc_xml_create(MC_XML_MAX_NODES, &fused));
  for (int r = 0; r < n_ranks; r++) {
    struct mc_xml *one = NULL;
    struct mc_topo_detect_rank me = {.rank = r,
                                     .dev = r,
                                     .numa_node = numa[r],
                                     .host_hash = HOST_HASH,
                                     .is_compute = !g_named_devices};
    MC_T_OK(mc_xml_create(256, &one));
    MC_T_OK(mc_topo_detect(mc_t_data(tree), &me, one));
    MC_T_OK(mc_xml_fuse(fused, one));
    mc_xml_destroy(one);
  }
  return fused;
}

static struct mc_topo_system *build(const struct mc_xml *xml, struct mc_topo_paths_opts *opts)
{
  struct mc_topo_system *sys = NULL;

  mc_topo_paths_opts_init(opts);
  MC_T_OK(mc_topo_system_from_xml(xml, HOST_HASH, &sys));
  MC_T_OK(mc_topo_compute_paths(sys, opts));
  return sys;
}

/* This VM, recorded by record.sh: 1 NUMA node, virtio-net eth0 (speed -1),
 * ifb0/ifb1 down, lo. */
static void vm_recorded(void)
{
  static const int numa[1] = {-1};
  struct mc_topo_paths_opts opts;
  struct mc_topo_system *sys;
  struct mc_xml *xml = NULL;

  use_nvml(NO_NVML, NULL, false);
  xml = detect_ranks("sysfs/vm-1numa-virtio", 1, numa);
  expect_xml(xml, "vm-1numa-virtio");
  sys = build(xml, &opts);
  MC_T_EQ_INT(sys->nodes[MC_TOPO_CPU].count, 1);
  MC_T_EQ_INT(sys->nodes[MC_TOPO_GPU].count, 1);
  MC_T_EQ_INT(sys->nodes[MC_TOPO_NET].count, 1);
  MC_T_EQ_INT(mc_topo_path_type(sys, MC_TOPO_GPU, 0, MC_TOPO_NET, 0), MC_PATH_PHB);
  mc_topo_system_destroy(sys);
  mc_xml_destroy(xml);
}

static void vm_numa_of_self(void)
{
  /* node0/cpulist of the recorded trees covers this process's CPUs; a
   * 2-node tree answers the lowest node holding an allowed CPU. */
  MC_T_EQ_INT(mc_topo_detect_numa_of_self(mc_t_data("sysfs/vm-1numa-virtio")), 0);
  MC_T_EQ_INT(mc_topo_detect_numa_of_self(mc_t_data("sysfs/2socket-switch")), 0);
  MC_T_EQ_INT(mc_topo_detect_numa_of_self("/nonexistent-root"), -1);
}

/* Hand-built 2-socket host (make-2socket.sh), 4 ranks, 2 per NUMA node, as
 * compute devices: sysfs alone never makes its GPUs ranks' devices. */
static void check_two_socket_compute(void)
{
  static const int numa[4] = {0, 0, 1, 1};
  struct mc_topo_paths_opts opts;
  struct mc_topo_system *sys;
  struct mc_xml *xml = detect_ranks("sysfs/2socket-switch", 4, numa);
  int p2p = -1;

  expect_xml(xml, "2socket-switch");
  sys = build(xml, &opts);
  MC_T_EQ_INT(sys->nodes[MC_TOPO_CPU].count, 2);
  MC_T_EQ_INT(sys->nodes[MC_TOPO_GPU].count, 4);
  MC_T_EQ_INT(sys->nodes[MC_TOPO_NET].count, 5);
  MC_T_EQ_INT(mc_topo_path_type(sys, MC_TOPO_GPU, 0, MC_TOPO_GPU, 1), MC_PATH_PIX);
  MC_T_EQ_INT(mc_topo_path_type(sys, MC_TOPO_GPU, 2, MC_TOPO_GPU, 3), MC_PATH_PIX);
  MC_T_EQ_INT(mc_topo_path_type(sys, MC_TOPO_GPU, 0, MC_TOPO_GPU, 2), MC_PATH_SYS);
  MC_T_OK(mc_topo_check_p2p(sys, &opts, 0, 1, &p2p, NULL, NULL));
  MC_T_EQ_INT(p2p, 1);
  MC_T_OK(mc_topo_check_p2p(sys, &opts, 2, 3, &p2p, NULL, NULL));
  MC_T_EQ_INT(p2p, 1);
  MC_T_OK(mc_topo_check_p2p(sys, &opts, 0, 2, &p2p, NULL, NULL));
  MC_T_EQ_INT(p2p, 0);
  MC_T_OK(mc_topo_check_p2p(sys, &opts, 1, 3, &p2p, NULL, NULL));
  MC_T_EQ_INT(p2p, 0);
  mc_topo_system_destroy(sys);
  mc_xml_destroy(xml);
}

/* No NVML library: compute devices, success. */
static void two_socket(void)
{
  use_nvml(NO_NVML, FAKE_GPUS, false);
  check_two_socket_compute();
}

/* NVML loads but nvmlInit_v2 fails: compute devices, success. */
static void nvml_init_fails(void)
{
  use_nvml(MC_T_FAKE_NVML, FAKE_GPUS, true);
  check_two_socket_compute();
  use_nvml(NO_NVML, NULL, false);
}

/* NVML works and reports no GPU: compute devices, success. */
static void nvml_no_gpu(void)
{
  use_nvml(MC_T_FAKE_NVML, "", false);
  check_two_socket_compute();
  use_nvml(NO_NVML, NULL, false);
}

/* Two ranks on the two NVML GPUs of the 2-socket tree: each GPU at its sysfs
 * PCI path (GPU 0 behind the switch with the NICs, GPU 1 under CPU 1), its
 * NVLinks grouped by target with the targets' sysfs classes. */
static void nvml_gpus(void)
{
  static const int numa[2] = {-1, -1};
  struct mc_topo_paths_opts opts;
  struct mc_topo_system *sys;
  struct mc_xml *xml = NULL;
  int p2p = -1;

  use_nvml(MC_T_FAKE_NVML, FAKE_GPUS, false);
  xml = detect_ranks("sysfs/2socket-switch", 2, numa);
  expect_xml(xml, "2socket-switch-nvml");
  sys = build(xml, &opts);
  MC_T_EQ_INT(sys->nodes[MC_TOPO_CPU].count, 2);
  MC_T_EQ_INT(sys->nodes[MC_TOPO_GPU].count, 2);
  MC_T_EQ_INT(sys->nodes[MC_TOPO_NVS].count, 1);
  MC_T_EQ_INT(sys->nodes[MC_TOPO_NET].count, 5);
  MC_T_EQ_INT(sys->nodes[MC_TOPO_GPU].nodes[0]->gpu.sm, 90);
  MC_T_EQ_INT(sys->nodes[MC_TOPO_GPU].nodes[1]->gpu.sm, 80);
  MC_T_EQ_INT(mc_topo_path_type(sys, MC_TOPO_GPU, 0, MC_TOPO_GPU, 1), MC_PATH_NVL);
  /* eth2 shares GPU 0's switch, but sockets have no GDR: through the CPU. */
  MC_T_EQ_INT(mc_topo_path_type(sys, MC_TOPO_GPU, 0, MC_TOPO_NET, 0), MC_PATH_PHB);
  MC_T_OK(mc_topo_check_p2p(sys, &opts, 0, 1, &p2p, NULL, NULL));
  MC_T_EQ_INT(p2p, 1);
  mc_topo_system_destroy(sys);
  mc_xml_destroy(xml);
  use_nvml(NO_NVML, NULL, false);
}

/* A CPU job on a GPU server: NVML reports 2 GPUs, 4 ranks whose devices the
 * job did not name are compute devices, exactly as without NVML (no
 * "rank 2 uses device 2 but NVML reports 2 GPU(s)"). */
static void nvml_gpus_unnamed_devices(void)
{
  use_nvml(MC_T_FAKE_NVML, FAKE_GPUS, false);
  g_named_devices = false;
  check_two_socket_compute();
  g_named_devices = true;
  use_nvml(NO_NVML, NULL, false);
}

/* A rank whose device is not an NVML GPU: ncclInvalidUsage naming the rank,
 * the device and the GPU count. */
static void nvml_dev_out_of_range(void)
{
  char want[1024];
  struct mc_xml *xml = NULL;
  struct mc_topo_detect_rank me = {.rank = 5, .dev = 2, .numa_node = -1, .host_hash = HOST_HASH};

  use_nvml(MC_T_FAKE_NVML, FAKE_GPUS, false);
  MC_T_OK(mc_xml_create(256, &xml));
  MC_T_EQ_INT(mc_topo_detect(mc_t_data("sysfs/2socket-switch"), &me, xml), ncclInvalidUsage);
  snprintf(want, sizeof(want),
           "Topo: rank 5 uses device 2 but %s reports 2 GPU(s) (devices 0..1): give each rank a "
           "device below 2 (ncclCommInitAll's devlist, meshcclSetDevice, MESHCCL_DEVICE) or "
           "start fewer ranks on this host",
           MC_T_FAKE_NVML);
  MC_T_EQ_STR(mc_t_last_error(), want);
  mc_xml_destroy(xml);
  use_nvml(NO_NVML, NULL, false);
}

/* Every attribute NCCL wrote on `want` is on `got` with NCCL's value, and
 * got has no other attribute than those in `extra` (what 2.30 writes and
 * 2.28.9 did not); host_hash is the test's own. Children compared in order. */
static void same_as_nccl(const struct mc_xml_node *got, const struct mc_xml_node *want,
                         const char *const *extra)
{
  MC_T_EQ_STR(got->name, want->name);
  for (int a = 0; a < want->n_attrs; a++) {
    const char *k = want->attrs[a].key;
    const char *v = mc_xml_get_attr(got, k);

    if (strcmp(k, "host_hash") == 0)
      continue;
    if ((v == NULL) || (strcmp(v, want->attrs[a].value) != 0))
      MC_T_FAIL("<%s %s=\"%s\">: NCCL wrote \"%s\"", got->name, k, (v != NULL) ? v : "(none)",
                want->attrs[a].value);
  }
  for (int a = 0; a < got->n_attrs; a++) {
    bool is_known = (mc_xml_get_attr(want, got->attrs[a].key) != NULL) ||
                    (strcmp(got->attrs[a].key, "host_hash") == 0);
    for (int e = 0; (extra[e] != NULL) && !is_known; e++)
      is_known = (strcmp(got->attrs[a].key, extra[e]) == 0);
    if (!is_known)
      MC_T_FAIL("<%s %s=\"%s\">: NCCL wrote no such attribute", got->name, got->attrs[a].key,
                got->attrs[a].value);
  }
  MC_T_EQ_INT(got->n_subs, want->n_subs);
  for (int i = 0; i < want->n_subs; i++)
    same_as_nccl(got->subs[i], want->subs[i], extra);
}

/* A cloud GPU VM (make-h200-vm.sh): the H200's numa_node is -1, so its CPU
 * is numaid -1 without affinity; the virtio NIC is not a PCI device and goes
 * under that first CPU. Compared with what NCCL 2.28.9 wrote there, whose
 * rules are 2.30's: 2.30 adds mlopart on gpu and net on net. */
static void h200_vm_as_nccl(void)
{
  static const char *const extra[] = {"mlopart", "net", NULL};
  struct mc_topo_detect_rank me = {.rank = 0, .dev = 0, .numa_node = -1, .host_hash = HOST_HASH};
  struct mc_xml *xml = NULL;
  struct mc_xml *nccl = NULL;

  use_nvml(MC_T_FAKE_NVML, "00000000:00:06.0,90", false);
  mc_param_set_for_tests(MC_P_CUDA_LIBRARY, MC_T_FAKE_CUDA);
  setenv("FAKE_CUDA_GPUS", "0000:00:06.0=1", 1);
  MC_T_OK(mc_xml_create(256, &xml));
  MC_T_OK(mc_xml_create(256, &nccl));
  MC_T_OK(mc_topo_detect(mc_t_data("sysfs/h200-vm-virtio"), &me, xml));
  expect_xml(xml, "h200-vm-virtio");
  MC_T_OK(mc_xml_load_file(mc_t_data("sysfs/h200-vm-virtio.nccl-2.28.9.xml"), nccl));
  same_as_nccl(&xml->nodes[0], &nccl->nodes[0], extra);
  mc_xml_destroy(nccl);
  mc_xml_destroy(xml);
  unsetenv("FAKE_CUDA_GPUS");
  use_nvml(NO_NVML, NULL, false);
}

/* A GPU's GPUDirect RDMA support, as CUDA says it (the fake driver), and 0
 * with the reason whenever the driver cannot say. */
static void cuda_gdr(void)
{
  char why[256];
  int gdr = -1;

  setenv("FAKE_CUDA_GPUS", "0000:05:00.0=0,0000:00:06.0=1", 1);
  mc_topo_cuda_gdr(MC_T_FAKE_CUDA, "0000:00:06.0", &gdr, why, sizeof(why));
  MC_T_EQ_INT(gdr, 1);
  MC_T_EQ_STR(why, "");
  mc_topo_cuda_gdr(MC_T_FAKE_CUDA, "0000:05:00.0", &gdr, why, sizeof(why));
  MC_T_EQ_INT(gdr, 0);
  MC_T_EQ_STR(why, "");
  mc_topo_cuda_gdr(MC_T_FAKE_CUDA, "0000:82:00.0", &gdr, why, sizeof(why));
  MC_T_EQ_INT(gdr, 0);
  MC_T_EQ_STR(why, "the driver knows no GPU at 0000:82:00.0 (CUresult 1)");
  setenv("FAKE_CUDA_DRIVER", "11020", 1);
  mc_topo_cuda_gdr(MC_T_FAKE_CUDA, "0000:00:06.0", &gdr, why, sizeof(why));
  MC_T_EQ_INT(gdr, 0);
  MC_T_EQ_STR(why, "driver version 11020 (CUresult 0): older than CUDA 11.3");
  unsetenv("FAKE_CUDA_DRIVER");
  setenv("FAKE_CUDA_INIT_FAIL", "1", 1);
  mc_topo_cuda_gdr(MC_T_FAKE_CUDA, "0000:00:06.0", &gdr, why, sizeof(why));
  MC_T_EQ_INT(gdr, 0);
  MC_T_EQ_STR(why, "cuInit failed with CUresult 100");
  unsetenv("FAKE_CUDA_INIT_FAIL");
  mc_topo_cuda_gdr("/nonexistent/libcuda.so.1", "0000:00:06.0", &gdr, why, sizeof(why));
  MC_T_EQ_INT(gdr, 0);
  MC_T_CONTAINS(why, "/nonexistent/libcuda.so.1");
  unsetenv("FAKE_CUDA_GPUS");
}

/* Handles opened, used and closed by several threads at once (several
 * communicators of one process). */
static void *nvml_thread(void *arg)
{
  long bad = 0;

  (void)arg;
  for (int i = 0; i < 50; i++) {
    struct mc_topo_nvml *nvml = NULL;
    struct mc_topo_nvml_gpu g;
    if ((mc_topo_nvml_open(MC_T_FAKE_NVML, &nvml) != ncclSuccess) ||
        (mc_topo_nvml_count(nvml) != 2) ||
        (mc_topo_nvml_gpu_info(nvml, i % 2, &g) != ncclSuccess) ||
        (strcmp(g.busid, (i % 2 == 0) ? "0000:05:00.0" : "0000:82:00.0") != 0)) {
      bad++;
    }
    mc_topo_nvml_close(nvml);
  }
  return (void *)bad;
}

static void nvml_threads(void)
{
  pthread_t t[4];
  struct mc_topo_nvml *nvml = NULL;
  struct mc_topo_nvml_gpu g;

  use_nvml(MC_T_FAKE_NVML, FAKE_GPUS, false);
  for (int i = 0; i < 4; i++) {
    MC_T_EQ_INT(pthread_create(&t[i], NULL, nvml_thread, NULL), 0);
  }
  for (int i = 0; i < 4; i++) {
    void *bad = NULL;
    MC_T_EQ_INT(pthread_join(t[i], &bad), 0);
    MC_T_EQ_INT((long)bad, 0);
  }
  /* The GPU's view through the interface: grouped, normalised targets. */
  MC_T_OK(mc_topo_nvml_open(MC_T_FAKE_NVML, &nvml));
  MC_T_OK(mc_topo_nvml_gpu_info(nvml, 0, &g));
  MC_T_EQ_INT(g.sm, 90);
  MC_T_EQ_INT(g.n_links, 4);
  MC_T_EQ_STR(g.links[0].target, "0000:83:00.0");
  MC_T_EQ_INT(g.links[0].count, 4);
  MC_T_EQ_STR(g.links[1].target, "0000:82:00.0");
  MC_T_EQ_INT(g.links[1].count, 2);
  MC_T_EQ_STR(g.links[2].target, "0000:c4:00.0");
  MC_T_EQ_STR(g.links[3].target, MC_TOPO_NVML_UNKNOWN_TARGET);
  MC_T_EQ_INT(mc_topo_nvml_gpu_info(nvml, 2, &g), ncclInvalidArgument);
  mc_topo_nvml_close(nvml);
  use_nvml(NO_NVML, NULL, false);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(path);
}

/* mc_t_tmp_cleanup removes files only: remove the tree first. */
static void rm_tree(const char *root)
{
  (void)nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS);
  mc_t_tmp_cleanup();
}

static void mk(const char *root, const char *rel)
{
  char path[1024];
  char *p;

  snprintf(path, sizeof(path), "%s/%s", root, rel);
  for (p = path + 1; *p != '\0'; p++) {
    if (*p == '/') {
      *p = '\0';
      (void)mkdir(path, 0755);
      *p = '/';
    }
  }
  (void)mkdir(path, 0755);
}

static void put(const char *root, const char *rel, const char *text)
{
  char path[1024];
  snprintf(path, sizeof(path), "%s/%s", root, rel);
  mc_t_write_file(path, text);
}

static void link_to(const char *root, const char *rel, const char *target)
{
  char path[1024];
  snprintf(path, sizeof(path), "%s/%s", root, rel);
  MC_T_EQ_INT(symlink(target, path), 0);
}

/* No /proc/cpuinfo, a virtual interface without a speed file: defaults. */
static void missing_files(void)
{
  char root[512];
  struct mc_xml *xml = NULL;
  struct mc_topo_detect_rank me = {.rank = 0, .dev = 0, .numa_node = 0, .host_hash = HOST_HASH};
  struct mc_xml_node *cpu;
  struct mc_xml_node *net;

  use_nvml(NO_NVML, NULL, false);
  mc_t_tmp_path("nocpuinfo", root, sizeof(root));
  mk(root, "sys/devices/system/node/node0");
  put(root, "sys/devices/system/node/node0/cpumap", "00000003\n");
  put(root, "sys/devices/system/node/node0/cpulist", "0-1\n");
  mk(root, "sys/devices/virtual/net/tun0");
  mk(root, "sys/class/net");
  put(root, "sys/devices/virtual/net/tun0/flags", "0x1091\n");
  link_to(root, "sys/class/net/tun0", "../../devices/virtual/net/tun0");
  MC_T_OK(mc_xml_create(256, &xml));
  MC_T_OK(mc_topo_detect(root, &me, xml));
  cpu = mc_xml_find_tag(xml, "cpu");
  MC_T_TRUE(cpu != NULL);
  MC_T_EQ_STR(mc_xml_get_attr(cpu, "affinity"), "00000003");
  MC_T_EQ_STR(mc_xml_get_attr(cpu, "vendor"), "");
  MC_T_EQ_STR(mc_xml_get_attr(cpu, "familyid"), "0");
  MC_T_EQ_STR(mc_xml_get_attr(cpu, "modelid"), "0");
  net = mc_xml_find_tag_kv(xml, "net", "name", "tun0");
  MC_T_TRUE(net != NULL);
  MC_T_TRUE(net->parent->parent == cpu);
  MC_T_EQ_STR(mc_xml_get_attr(net, "speed"), "10000");
  MC_T_EQ_STR(mc_xml_get_attr(net, "dev"), "0");
  mc_xml_destroy(xml);
  rm_tree(root);
}

/* A NIC's PCI class that cannot be read (a directory): ncclSystemError
 * naming the file. */
static void unreadable_file(void)
{
  char root[512];
  struct mc_xml *xml = NULL;
  struct mc_topo_detect_rank me = {.rank = 0, .dev = 0, .numa_node = 0, .host_hash = HOST_HASH};

  use_nvml(NO_NVML, NULL, false);
  mc_t_tmp_path("badclass", root, sizeof(root));
  mk(root, "sys/devices/pci0000:00/0000:00:05.0/class");
  put(root, "sys/devices/pci0000:00/0000:00:05.0/numa_node", "0\n");
  mk(root, "sys/bus/pci/devices");
  link_to(root, "sys/bus/pci/devices/0000:00:05.0", "../../../devices/pci0000:00/0000:00:05.0");
  mk(root, "sys/devices/pci0000:00/0000:00:05.0/net/eth7");
  put(root, "sys/devices/pci0000:00/0000:00:05.0/net/eth7/flags", "0x1003\n");
  link_to(root, "sys/devices/pci0000:00/0000:00:05.0/net/eth7/device", "../../../0000:00:05.0");
  mk(root, "sys/class/net");
  link_to(root, "sys/class/net/eth7", "../../devices/pci0000:00/0000:00:05.0/net/eth7");
  MC_T_OK(mc_xml_create(256, &xml));
  MC_T_EQ_INT(mc_topo_detect(root, &me, xml), ncclSystemError);
  MC_T_CONTAINS(mc_t_last_error(), "0000:00:05.0/class");
  mc_xml_destroy(xml);
  rm_tree(root);
}

static int count_tag(const struct mc_xml *xml, const char *name)
{
  int n = 0;
  for (int i = 0; i < xml->n_nodes; i++) {
    if (strcmp(xml->nodes[i].name, name) == 0) {
      n++;
    }
  }
  return n;
}

/* p4d's file (CPUs and switches) completed by detection on the 2-socket
 * tree, twice (two ranks of one process): nothing duplicated, file values
 * kept, host_hash set on every cpu. */
static void partial_xml(void)
{
  struct mc_xml *xml = NULL;
  struct mc_topo_detect_rank me0 = {.rank = 0, .dev = 0, .numa_node = 0, .host_hash = HOST_HASH};
  struct mc_topo_detect_rank me1 = {.rank = 1, .dev = 1, .numa_node = 1, .host_hash = HOST_HASH};
  struct mc_topo_paths_opts opts;
  struct mc_topo_system *sys;
  char *first;
  char *second;
  int n_nodes;

  use_nvml(NO_NVML, NULL, false);
  MC_T_OK(mc_xml_create(MC_XML_MAX_NODES, &xml));
  MC_T_OK(mc_xml_load_file(mc_t_data("topo/aws-p4d.24xlarge.xml"), xml));
  MC_T_OK(mc_topo_detect(mc_t_data("sysfs/2socket-switch"), &me0, xml));
  MC_T_OK(mc_topo_detect(mc_t_data("sysfs/2socket-switch"), &me1, xml));
  first = dump_xml(xml);
  n_nodes = xml->n_nodes;
  MC_T_OK(mc_topo_detect(mc_t_data("sysfs/2socket-switch"), &me0, xml));
  MC_T_OK(mc_topo_detect(mc_t_data("sysfs/2socket-switch"), &me1, xml));
  second = dump_xml(xml);
  MC_T_EQ_INT(xml->n_nodes, n_nodes);
  MC_T_EQ_STR(second, first);
  free(first);
  free(second);
  MC_T_EQ_INT(count_tag(xml, "cpu"), 2);
  MC_T_EQ_INT(count_tag(xml, "gpu"), 2);
  MC_T_EQ_INT(count_tag(xml, "net"), 5);
  MC_T_TRUE(mc_xml_find_tag_kv(xml, "pci", "busid", "ffff:ff:01.0") != NULL);
  MC_T_EQ_STR(mc_xml_get_attr(mc_xml_find_tag(xml, "cpu"), "affinity"),
              "000000ff,ffff0000,00ffffff");
  MC_T_EQ_STR(mc_xml_get_attr(mc_xml_find_tag(xml, "cpu"), "host_hash"), "0x1234abcd");
  expect_xml(xml, "2socket-switch-p4d");
  sys = build(xml, &opts);
  MC_T_EQ_INT(sys->nodes[MC_TOPO_GPU].count, 2);
  MC_T_EQ_INT(mc_topo_path_type(sys, MC_TOPO_GPU, 0, MC_TOPO_GPU, 1), MC_PATH_SYS);
  mc_topo_system_destroy(sys);
  mc_xml_destroy(xml);
}

MC_T_MAIN(vm_recorded, vm_numa_of_self, two_socket, nvml_init_fails, nvml_no_gpu, nvml_gpus,
          nvml_gpus_unnamed_devices, h200_vm_as_nccl, cuda_gdr, nvml_dev_out_of_range, nvml_threads,
          missing_files, unreadable_file, partial_xml)
