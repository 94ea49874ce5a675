/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Loading of external NCCL net plugins, as NCCL 2.30 does it
 * (src/plugin/net.cc initPluginLibsOnceFunc and ncclNetPluginLoad,
 * src/plugin/plugin_open.cc openPluginLib):
 *   NCCL_NET_PLUGIN unset        libnccl-net.so; not finding it is normal
 *   "none" (any case)            no plugin
 *   a comma-separated list       each choice in order until one works; a
 *                                choice is opened as given (a path, or a
 *                                file name the loader searches), then, when
 *                                it has no '/' and is not already lib*.so,
 *                                as libnccl-net-<choice>.so
 * dlopen(RTLD_NOW | RTLD_LOCAL), then ncclNetPlugin_v12 down to _v6: the
 * first symbol found is wrapped by the adapter of its version, the table is
 * validated (mc_net_ops_validate) and probed once (init, devices, the first
 * device's properties, which must include host memory, finalize). Each
 * choice that fails says why in one line; when NCCL_NET_PLUGIN was set and
 * no choice works, the caller fails with every reason (NCCL falls back to
 * its internal nets silently, a frequent complaint). Libraries stay open
 * until the process exits.
 */
#include "net/external/plugin.h"
#include "plugin_int.h"

#include "check.h"
#include "log.h"
#include "params.h"
#include "utils.h"

#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MAX_LIBS    16 /* NCCL_NET_MAX_PLUGINS */
#define MAX_CHOICES 14 /* NCCL_NET_MAX_PLUGINS minus NCCL's two internal nets */
#define WHY_BYTES   2048
#define DEFAULT_LIB "libnccl-net.so"

/* Newest first, as NCCL looks them up. */
static const struct mc_net_plugin_adapter *const adapters[] = {
    &mc_net_plugin_v12, &mc_net_plugin_v11, &mc_net_plugin_v10, &mc_net_plugin_v9,
    &mc_net_plugin_v8,  &mc_net_plugin_v7,  &mc_net_plugin_v6,
};
#define N_ADAPTERS ((int)(sizeof(adapters) / sizeof(adapters[0])))

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* Every library bound to an adapter, usable or not (an adapter may point at it). */
static struct mc_net_plugin libs[MAX_LIBS];
static bool lib_usable[MAX_LIBS];
static int n_libs;

/* mc_net_plugin_get's decision, per value of NCCL_NET_PLUGIN. */
static struct {
  bool made;
  bool spec_set;
  char spec[1024];
  const struct mc_net_ops *ops;
  ncclResult_t res;
  char why[WHY_BYTES];
  char error[WHY_BYTES];
} decision;

static void why_add(char *why, size_t why_bytes, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void why_add(char *why, size_t why_bytes, const char *fmt, ...)
{
  size_t used;
  va_list ap;

  if ((why == NULL) || (why_bytes == 0))
    return;
  used = strlen(why);
  if ((used > 0) && (used + 2 < why_bytes)) {
    memcpy(why + used, "; ", 3);
    used += 2;
  }
  if (used + 1 >= why_bytes)
    return;
  va_start(ap, fmt);
  vsnprintf(why + used, why_bytes - used, fmt, ap);
  va_end(ap);
}

/* A choice that is neither a path nor a library file name gets NCCL's prefix. */
static bool wants_prefix(const char *choice)
{
  size_t n = strlen(choice);

  if (strchr(choice, '/') != NULL)
    return false;
  return !((strncmp(choice, "lib", 3) == 0) && (n >= 3) && (strcmp(choice + n - 3, ".so") == 0));
}

/* dlopen of a choice as given, then prefixed; *tried_out names the file opened. */
static void *open_choice(const char *choice, char *tried_out, size_t tried_bytes, char *why,
                         size_t why_bytes)
{
  char names[2][PATH_MAX];
  int n = 0;

  snprintf(names[n++], PATH_MAX, "%s", (choice != NULL) ? choice : DEFAULT_LIB);
  if ((choice != NULL) && wants_prefix(choice))
    snprintf(names[n++], PATH_MAX, "libnccl-net-%s.so", choice);
  for (int i = 0; i < n; i++) {
    void *dl = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    const char *err;
    if (dl != NULL) {
      size_t len = strnlen(names[i], tried_bytes - 1);
      memcpy(tried_out, names[i], len);
      tried_out[len] = '\0';
      return dl;
    }
    err = dlerror();
    /* NCCL's words for a library that is not there; any other failure as
     * dlerror says it (it names the file). */
    if ((err == NULL) || (strstr(err, "cannot open shared object file: No such file") != NULL))
      MC_INFO(MC_SUB_INIT | MC_SUB_NET, "NET/Plugin: Could not find: %s", names[i]);
    else
      MC_INFO(MC_SUB_INIT | MC_SUB_NET, "NET/Plugin: %s", err);
    why_add(why, why_bytes, "%s", (err != NULL) ? err : names[i]);
  }
  return NULL;
}

static void lib_path(void *dl, const char *fallback, char *out, size_t out_bytes)
{
  struct link_map *lm = NULL;

  if ((dlinfo(dl, RTLD_DI_LINKMAP, &lm) == 0) && (lm != NULL) && (lm->l_name != NULL) &&
      (lm->l_name[0] != '\0'))
    snprintf(out, out_bytes, "%s", lm->l_name);
  else
    snprintf(out, out_bytes, "%s", fallback);
}

/* Init, devices, properties of device 0, finalize: what meshccl needs. */
static ncclResult_t probe(struct mc_net_plugin *p, char *reason, size_t reason_bytes)
{
  struct mc_net_init_args args = {.comm_id = 0, .secret = NULL, .abort_flag = NULL};
  struct mc_net_props props;
  void *ctx = NULL;
  int n_devs = 0;
  ncclResult_t res;

  res = p->ops.init(&args, &ctx);
  if (res != ncclSuccess) {
    snprintf(reason, reason_bytes, "init failed (%s)", mc_plugin_res_str(res));
    return res;
  }
  res = p->ops.devices(ctx, &n_devs);
  if ((res == ncclSuccess) && (n_devs <= 0)) {
    snprintf(reason, reason_bytes, "it has no device");
    res = ncclSystemError;
  } else if (res != ncclSuccess) {
    snprintf(reason, reason_bytes, "devices failed (%s)", mc_plugin_res_str(res));
  }
  if (res == ncclSuccess) {
    res = p->ops.get_properties(ctx, 0, &props);
    if (res != ncclSuccess) {
      snprintf(reason, reason_bytes, "getProperties failed (%s)", mc_plugin_res_str(res));
    } else if ((props.ptr_support & MC_NET_PTR_HOST) == 0) {
      snprintf(reason, reason_bytes,
               "its device %s cannot use host memory (ptrSupport 0x%x lacks NCCL_PTR_HOST), "
               "which is all meshccl has",
               props.name, props.ptr_support);
      res = ncclInvalidUsage;
    }
  }
  (void)p->ops.finalize(ctx);
  return res;
}

static struct mc_net_plugin *lib_find(const void *table)
{
  for (int i = 0; i < n_libs; i++) {
    if (libs[i].table == table)
      return &libs[i];
  }
  return NULL;
}

/* One choice of the list; *ops_out on success. why gathers the failure. */
static ncclResult_t load_choice(const char *choice, const struct mc_net_ops **ops_out, char *why,
                                size_t why_bytes)
{
  char opened[PATH_MAX];
  char path[PATH_MAX];
  char reason[512];
  const struct mc_net_plugin_adapter *a = NULL;
  struct mc_net_plugin *p;
  const void *table = NULL;
  void *dl;
  ncclResult_t res;
  int idx;

  dl = open_choice(choice, opened, sizeof(opened), why, why_bytes);
  if (dl == NULL)
    return ncclInvalidUsage;
  lib_path(dl, opened, path, sizeof(path));
  for (int i = 0; (i < N_ADAPTERS) && (table == NULL); i++) {
    table = dlsym(dl, adapters[i]->symbol);
    a = adapters[i];
  }
  if (table == NULL) {
    MC_INFO(MC_SUB_INIT | MC_SUB_NET,
            "NET/Plugin: %s exports none of ncclNetPlugin_v12 ... ncclNetPlugin_v6: not a net "
            "plugin meshccl supports",
            path);
    why_add(why, why_bytes, "%s: exports none of ncclNetPlugin_v12 ... ncclNetPlugin_v6", path);
    dlclose(dl);
    return ncclInvalidUsage;
  }
  p = lib_find(table);
  if (p != NULL) {
    /* The same library under another name: its first load decided. */
    dlclose(dl);
    idx = (int)(p - libs);
    if (!lib_usable[idx]) {
      why_add(why, why_bytes, "%s: failed before in this process", p->path);
      return ncclInvalidUsage;
    }
    *ops_out = &p->ops;
    return ncclSuccess;
  }
  if (n_libs == MAX_LIBS) {
    why_add(why, why_bytes, "%s: more than %d plugin libraries tried in this process", path,
            MAX_LIBS);
    dlclose(dl);
    return ncclInvalidUsage;
  }
  p = &libs[n_libs];
  memset(p, 0, sizeof(*p));
  p->version = a->version;
  p->table = table;
  p->dl = dl;
  snprintf(p->path, sizeof(p->path), "%s", path);
  snprintf(p->symbol, sizeof(p->symbol), "%s", a->symbol);
  /* name is the first member of every version's table. */
  snprintf(p->name, sizeof(p->name), "%s",
           (*(const char *const *)table != NULL) ? *(const char *const *)table : "(unnamed)");
  pthread_mutex_init(&p->init_lock, NULL);
  p->ops = *a->ops;
  p->ops.name = p->name;
  res = a->bind(p);
  if (res != ncclSuccess) {
    mc_error_last_copy(reason, sizeof(reason));
    why_add(why, why_bytes, "%s", reason);
    pthread_mutex_destroy(&p->init_lock);
    dlclose(dl);
    return res;
  }
  n_libs++; /* bound: the adapter may point at it from now on */
  res = mc_net_ops_validate(&p->ops, p->path);
  if (res == ncclSuccess)
    res = probe(p, reason, sizeof(reason));
  else
    mc_error_last_copy(reason, sizeof(reason));
  if (res != ncclSuccess) {
    MC_INFO(MC_SUB_INIT | MC_SUB_NET, "NET/Plugin: %s (%s, plugin %s): %s", p->path, p->symbol,
            p->name, reason);
    why_add(why, why_bytes, "%s (%s, plugin %s): %s", p->path, p->symbol, p->name, reason);
    return ncclInvalidUsage;
  }
  lib_usable[n_libs - 1] = true;
  MC_INFO(MC_SUB_INIT | MC_SUB_NET, "NET/Plugin: Loaded net plugin %s (v%d) from %s, symbol %s",
          p->name, p->version, p->path, p->symbol);
  *ops_out = &p->ops;
  return ncclSuccess;
}

/* The caller holds the lock. */
static ncclResult_t load_locked(const char *spec, bool asked, const struct mc_net_ops **ops_out,
                                char *why, size_t why_bytes)
{
  char list[1024];
  char *save = NULL;
  int n = 0;

  if (why != NULL)
    why[0] = '\0';
  *ops_out = NULL;
  if (spec == NULL) {
    /* Unset: libnccl-net.so is optional, as in NCCL. */
    (void)load_choice(NULL, ops_out, why, why_bytes);
    return ncclSuccess;
  }
  if (strcasecmp(spec, "none") == 0) {
    why_add(why, why_bytes, "NCCL_NET_PLUGIN=none");
    return ncclSuccess;
  }
  snprintf(list, sizeof(list), "%s", spec);
  for (char *c = strtok_r(list, ",", &save); c != NULL; c = strtok_r(NULL, ",", &save)) {
    if (*c == '\0')
      continue;
    if (n++ == MAX_CHOICES) {
      MC_INFO(MC_SUB_INIT | MC_SUB_NET | MC_SUB_ENV,
              "NCCL_NET_PLUGIN lists more than %d plugins; ignoring the rest from %s", MAX_CHOICES,
              c);
      break;
    }
    if (load_choice(c, ops_out, why, why_bytes) == ncclSuccess)
      return ncclSuccess;
  }
  if (!asked)
    return ncclSuccess;
  return MC_FAIL(ncclInvalidUsage,
                 "NET/Plugin: NCCL_NET_PLUGIN=%s: no plugin could be loaded: %s (set "
                 "NCCL_NET_PLUGIN=none for the built-in nets; docs/TROUBLESHOOTING.md#net-plugin)",
                 spec, ((why != NULL) && (why[0] != '\0')) ? why : "empty list");
}

ncclResult_t mc_net_plugin_load(const char *spec, bool asked, const struct mc_net_ops **ops_out,
                                char *why, size_t why_bytes)
{
  char local[WHY_BYTES];
  ncclResult_t res;

  if (why == NULL) {
    why = local;
    why_bytes = sizeof(local);
  }
  pthread_mutex_lock(&lock);
  res = load_locked(spec, asked, ops_out, why, why_bytes);
  pthread_mutex_unlock(&lock);
  return res;
}

ncclResult_t mc_net_plugin_get(const struct mc_net_ops **ops_out, const char **why_out)
{
  const char *spec = mc_param_str(MC_P_NET_PLUGIN);
  bool same;
  ncclResult_t res;

  pthread_mutex_lock(&lock);
  same = decision.made && (decision.spec_set == (spec != NULL)) &&
         ((spec == NULL) || (strcmp(decision.spec, spec) == 0));
  if (!same) {
    decision.made = true;
    decision.spec_set = (spec != NULL);
    snprintf(decision.spec, sizeof(decision.spec), "%s", (spec != NULL) ? spec : "");
    if (spec != NULL)
      MC_INFO(MC_SUB_ENV | MC_SUB_NET, "NCCL_NET_PLUGIN set by environment to %s", spec);
    decision.res =
        load_locked(spec, spec != NULL, &decision.ops, decision.why, sizeof(decision.why));
    if (decision.res != ncclSuccess)
      mc_error_last_copy(decision.error, sizeof(decision.error));
    pthread_mutex_unlock(&lock);
    res = decision.res;
  } else {
    res = decision.res;
    pthread_mutex_unlock(&lock);
    /* Every communicator that asks again gets the error recorded for it. */
    if (res != ncclSuccess)
      res = MC_FAIL(res, "%s", decision.error);
  }
  if (res != ncclSuccess)
    return res;
  *ops_out = decision.ops;
  if (why_out != NULL)
    *why_out = decision.why;
  return ncclSuccess;
}

static const struct mc_net_plugin *lib_of(const struct mc_net_ops *ops)
{
  const struct mc_net_plugin *p = NULL;

  pthread_mutex_lock(&lock);
  for (int i = 0; (i < n_libs) && (p == NULL); i++) {
    if (&libs[i].ops == ops)
      p = &libs[i];
  }
  pthread_mutex_unlock(&lock);
  return p;
}

int mc_net_plugin_version(const struct mc_net_ops *ops)
{
  const struct mc_net_plugin *p = lib_of(ops);

  return (p != NULL) ? p->version : 0;
}

const char *mc_net_plugin_path(const struct mc_net_ops *ops)
{
  const struct mc_net_plugin *p = lib_of(ops);

  return (p != NULL) ? p->path : NULL;
}
