/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Bootstrap network and unique ids. Mirrors NCCL's bootstrapNetInit and
 * bootstrapGetUniqueId (bootstrap.cc): the interface is chosen once per
 * process; an id is a random magic plus the root's address, or, with
 * NCCL_COMM_ID, NCCL's fixed magic plus that address, computed identically
 * by every rank without starting a root. Unlike NCCL's, the id also carries
 * the job's secret, which every bootstrap connection must prove to know:
 * random in a random id (it travels with the id); with NCCL_COMM_ID, where
 * nothing travels, derived from MESHCCL_SECRET (set by the launcher) and the
 * address, or from the address alone (the same protocol, without secrecy,
 * said once at WARN). A published id (meshcclGetPublicUniqueId) carries no
 * secret: every rank derives it from MESHCCL_SECRET and the id's nonce.
 */
#include "bootstrap.h"

#include <pthread.h>
#include <string.h>

#include "bootstrap_int.h"
#include "check.h"
#include "crypto.h"
#include "log.h"
#include "params.h"

#define COMM_ID_SECRET_LABEL "meshccl bootstrap secret v1"
#define PUBLIC_SECRET_LABEL  "meshccl published id secret v1"

_Static_assert(MC_BOOT_SECRET_BYTES == MC_SHA256_BYTES, "a derived secret is one HMAC-SHA256");
_Static_assert(sizeof(struct mc_boot_handle) == NCCL_UNIQUE_ID_BYTES, "a handle fills an id");

static pthread_mutex_t net_lock = PTHREAD_MUTEX_INITIALIZER;
static bool net_ready;
static struct mc_ifc net_ifc;

ncclResult_t mc_boot_net_init(const union mc_sockaddr *root_hint, struct mc_ifc *ifc_out)
{
  ncclResult_t res = ncclSuccess;
  const char *comm_id = mc_param_str(MC_P_COMM_ID);

  pthread_mutex_lock(&net_lock);
  if (!net_ready) {
    union mc_sockaddr root;
    /* An explicit NCCL_SOCKET_IFNAME wins over a root address that is not NCCL_COMM_ID. */
    if ((root_hint != NULL) && (mc_param_str(MC_P_SOCKET_IFNAME) == NULL)) {
      res = mc_if_find_bootstrap(root_hint, &net_ifc);
    } else if (comm_id != NULL) {
      res = mc_sockaddr_parse(comm_id, "NCCL_COMM_ID", &root);
      if (res == ncclSuccess)
        res = mc_if_find_bootstrap(&root, &net_ifc);
    } else {
      res = mc_if_find_bootstrap(NULL, &net_ifc);
    }
    net_ready = (res == ncclSuccess);
  }
  if (net_ready)
    *ifc_out = net_ifc;
  pthread_mutex_unlock(&net_lock);
  if (res != ncclSuccess)
    MC_TRACE_RES(res);
  return res;
}

/* Once per process, at WARN: an id whose secret comes from its address
 * alone lets anyone who can reach that address join. */
static void say_open(const union mc_sockaddr *addr)
{
  static int is_said;
  char a[MC_SOCKADDR_STRLEN];

  if (__atomic_exchange_n(&is_said, 1, __ATOMIC_RELAXED) == 0)
    MC_WARN("Bootstrap: MESHCCL_SECRET is unset: the bootstrap secret of root %s is derived from "
            "its address, so any process that can reach that address can join this job's "
            "communicators; set MESHCCL_SECRET to the same random value on every rank "
            "(meshccl-run does)",
            mc_sockaddr_str(addr, a, sizeof(a)));
}

void mc_boot_id_say_open(const ncclUniqueId *id)
{
  struct mc_boot_handle h;

  memcpy(&h, id->internal, sizeof(h));
  if (h.secret_source == MC_BOOT_SECRET_ADDRESS)
    say_open(&h.addr);
  mc_crypto_wipe(&h, sizeof(h));
}

/*
 * The secret of an id that every rank computes alone (NCCL_COMM_ID,
 * meshcclCommInitFromEnv): HMAC-SHA256 keyed with MESHCCL_SECRET (empty when
 * unset) over a label, the address family, port and IP address (not an IPv6
 * scope id, which differs between hosts).
 */
static void comm_id_secret(struct mc_boot_handle *h)
{
  const char *env = mc_param_str(MC_P_SECRET);
  bool has_env = (env != NULL) && (env[0] != '\0');
  uint16_t family = h->addr.sa.sa_family;
  uint16_t port = (uint16_t)mc_sockaddr_port(&h->addr);
  struct mc_hmac_sha256 m;

  mc_hmac_sha256_init(&m, has_env ? env : "", has_env ? strlen(env) : 0);
  mc_hmac_sha256_update(&m, COMM_ID_SECRET_LABEL, sizeof(COMM_ID_SECRET_LABEL) - 1);
  mc_hmac_sha256_update(&m, &family, sizeof(family));
  mc_hmac_sha256_update(&m, &port, sizeof(port));
  if (family == AF_INET)
    mc_hmac_sha256_update(&m, &h->addr.sin.sin_addr, sizeof(h->addr.sin.sin_addr));
  else if (family == AF_INET6)
    mc_hmac_sha256_update(&m, &h->addr.sin6.sin6_addr, sizeof(h->addr.sin6.sin6_addr));
  mc_hmac_sha256_final(&m, h->secret);
  h->secret_source = has_env ? MC_BOOT_SECRET_ENV : MC_BOOT_SECRET_ADDRESS;
  if (!has_env)
    say_open(&h->addr);
}

/* An id for a root at addr that every rank computes alike. */
static void comm_id_handle(const union mc_sockaddr *addr, ncclUniqueId *id_out)
{
  struct mc_boot_handle h;

  memset(&h, 0, sizeof(h));
  memset(id_out, 0, sizeof(*id_out));
  h.magic = MC_BOOT_COMM_ID_MAGIC;
  h.addr = *addr;
  comm_id_secret(&h);
  memcpy(id_out->internal, &h, sizeof(h));
  mc_crypto_wipe(&h, sizeof(h));
}

ncclResult_t mc_boot_unique_id(bool use_comm_id, ncclUniqueId *id_out)
{
  struct mc_boot_handle h;
  struct mc_ifc ifc;
  const char *comm_id = mc_param_str(MC_P_COMM_ID);
  union mc_sockaddr local;
  ncclUniqueId id;

  memset(&h, 0, sizeof(h));
  memset(&id, 0, sizeof(id));
  MC_CHECK(mc_boot_net_init(NULL, &ifc));
  if (use_comm_id && (comm_id != NULL)) {
    MC_CHECK(mc_sockaddr_parse(comm_id, "NCCL_COMM_ID", &local));
    comm_id_handle(&local, id_out);
    return ncclSuccess;
  }
  local = ifc.addr;
  mc_sockaddr_set_port(&local, 0);
  MC_CHECK(mc_random_bytes(&h.magic, sizeof(h.magic)));
  if (h.magic == MC_BOOT_COMM_ID_MAGIC)
    h.magic ^= 1;
  MC_CHECK(mc_random_bytes(h.secret, sizeof(h.secret)));
  h.secret_source = MC_BOOT_SECRET_RANDOM;
  MC_CHECK(mc_boot_root_create(&local, h.magic, h.secret, &h.addr));
  memcpy(id.internal, &h, sizeof(h));
  mc_crypto_wipe(&h, sizeof(h));
  *id_out = id;
  return ncclSuccess;
}

/* The secret of a published id: HMAC-SHA256 keyed with MESHCCL_SECRET over
 * a label, the magic and the nonce (not the address: a root started here
 * learns its port only when it listens, after the secret is needed). */
static void public_secret(const char *env, struct mc_boot_handle *h)
{
  struct mc_hmac_sha256 m;

  mc_hmac_sha256_init(&m, env, strlen(env));
  mc_hmac_sha256_update(&m, PUBLIC_SECRET_LABEL, sizeof(PUBLIC_SECRET_LABEL) - 1);
  mc_hmac_sha256_update(&m, &h->magic, sizeof(h->magic));
  mc_hmac_sha256_update(&m, h->nonce, sizeof(h->nonce));
  mc_hmac_sha256_final(&m, h->secret);
  mc_crypto_wipe(&m, sizeof(m));
  h->secret_source = MC_BOOT_SECRET_NONCE;
}

static const char *job_secret(void)
{
  const char *env = mc_param_str(MC_P_SECRET);

  return ((env != NULL) && (env[0] != '\0')) ? env : NULL;
}

ncclResult_t mc_boot_unique_id_public(ncclUniqueId *id_out)
{
  struct mc_boot_handle h;
  struct mc_ifc ifc;
  const char *env = job_secret();
  const char *comm_id = mc_param_str(MC_P_COMM_ID);
  union mc_sockaddr local;
  ncclUniqueId id;

  if (env == NULL)
    return MC_FAIL(ncclInvalidUsage,
                   "meshcclGetPublicUniqueId : MESHCCL_SECRET is unset: a published id's secret "
                   "is derived from it; set MESHCCL_SECRET to the same random value on every rank "
                   "(meshccl-run does), or share an id of ncclGetUniqueId privately");
  memset(&h, 0, sizeof(h));
  memset(&id, 0, sizeof(id));
  MC_CHECK(mc_boot_net_init(NULL, &ifc));
  MC_CHECK(mc_random_bytes(h.nonce, sizeof(h.nonce)));
  if (comm_id != NULL) {
    /* Rank 0 starts the root at init, with the secret every rank derives. */
    MC_CHECK(mc_sockaddr_parse(comm_id, "NCCL_COMM_ID", &h.addr));
    h.magic = MC_BOOT_COMM_ID_MAGIC;
  } else {
    local = ifc.addr;
    mc_sockaddr_set_port(&local, 0);
    MC_CHECK(mc_random_bytes(&h.magic, sizeof(h.magic)));
    if (h.magic == MC_BOOT_COMM_ID_MAGIC)
      h.magic ^= 1;
    public_secret(env, &h);
    MC_CHECK(mc_boot_root_create(&local, h.magic, h.secret, &h.addr));
  }
  mc_crypto_wipe(h.secret, sizeof(h.secret));
  h.secret_source = MC_BOOT_SECRET_PUBLIC;
  memcpy(id.internal, &h, sizeof(h));
  *id_out = id;
  return ncclSuccess;
}

ncclResult_t mc_boot_id_add_secret(ncclUniqueId *id_io)
{
  struct mc_boot_handle h;
  const char *env = job_secret();
  char a[MC_SOCKADDR_STRLEN];

  if (!mc_boot_id_is_public(id_io))
    return ncclSuccess;
  memcpy(&h, id_io->internal, sizeof(h));
  if (env == NULL)
    return MC_FAIL(ncclInvalidUsage,
                   "meshcclUniqueIdAddSecret : MESHCCL_SECRET is unset, and the published id of "
                   "root %s needs it: set MESHCCL_SECRET to the value rank 0 has (the same on "
                   "every rank; meshccl-run sets one)",
                   mc_sockaddr_str(&h.addr, a, sizeof(a)));
  public_secret(env, &h);
  memcpy(id_io->internal, &h, sizeof(h));
  mc_crypto_wipe(&h, sizeof(h));
  return ncclSuccess;
}

bool mc_boot_id_is_public(const ncclUniqueId *id)
{
  struct mc_boot_handle h;

  memcpy(&h, id->internal, sizeof(h));
  return h.secret_source == MC_BOOT_SECRET_PUBLIC;
}

ncclResult_t mc_boot_unique_id_at(const union mc_sockaddr *addr, ncclUniqueId *id_out)
{
  struct mc_ifc ifc;

  MC_CHECK(mc_boot_net_init(addr, &ifc));
  comm_id_handle(addr, id_out);
  return ncclSuccess;
}

bool mc_boot_id_is_comm_id(const ncclUniqueId *id)
{
  struct mc_boot_handle h;

  memcpy(&h, id->internal, sizeof(h));
  return h.magic == MC_BOOT_COMM_ID_MAGIC;
}

struct mc_wait mc_boot_wait_make(int64_t ms, const volatile uint32_t *abort_flag)
{
  struct mc_wait w;

  memset(&w, 0, sizeof(w));
  w.dl = mc_deadline_in_ms(ms);
  w.abort_flag = abort_flag;
  return w;
}

int64_t mc_boot_op_timeout_ms(void)
{
  return mc_param_int(MC_P_BOOTSTRAP_TIMEOUT) * 1000;
}

/* ---------- several roots ---------- */

int mc_boot_root_first_rank(int root, int n_ranks, int n_roots)
{
  int per = n_ranks / n_roots;
  int big = n_ranks % n_roots; /* the first `big` groups hold per + 1 ranks */

  return root * per + ((root < big) ? root : big);
}

int mc_boot_root_of_rank(int rank, int n_ranks, int n_roots)
{
  int per = n_ranks / n_roots;
  int big = n_ranks % n_roots;
  int in_big = big * (per + 1); /* ranks in the larger groups */

  if (rank < in_big)
    return rank / (per + 1);
  return big + (rank - in_big) / per;
}

#define JOB_SECRET_LABEL "meshccl multi-root job secret v1"

ncclResult_t mc_boot_job_id(const ncclUniqueId *ids, int n_ids, const char *call,
                            ncclUniqueId *job_out)
{
  struct mc_boot_handle h;
  struct mc_sha256 s;
  ncclUniqueId job;
  char why[128];
  int32_t n = n_ids;

  if (n_ids == 1) {
    *job_out = ids[0];
    return ncclSuccess;
  }
  for (int i = 0; i < n_ids; i++) {
    struct mc_boot_handle hi;
    memcpy(&hi, ids[i].internal, sizeof(hi));
    if (hi.magic == MC_BOOT_COMM_ID_MAGIC)
      return MC_FAIL(ncclInvalidArgument,
                     "%s : commIds[%d] was made with NCCL_COMM_ID set (one fixed root, started by "
                     "rank 0); with nId %d > 1 every id must come from ncclGetUniqueId without "
                     "NCCL_COMM_ID, each naming the root it started",
                     call, i, n_ids);
    if (!mc_boot_addr_check(&hi.addr, why, sizeof(why)))
      return MC_FAIL(ncclInvalidArgument,
                     "%s : commIds[%d] is not an id of ncclGetUniqueId (root address: %s)", call, i,
                     why);
    for (int j = 0; j < i; j++) {
      struct mc_boot_handle hj;
      char a[MC_SOCKADDR_STRLEN];
      memcpy(&hj, ids[j].internal, sizeof(hj));
      if ((hj.magic == hi.magic) && mc_sockaddr_equal(&hj.addr, &hi.addr))
        return MC_FAIL(ncclInvalidArgument,
                       "%s : commIds[%d] and commIds[%d] are the same id (root %s): every root "
                       "needs its own ncclGetUniqueId call",
                       call, j, i, mc_sockaddr_str(&hi.addr, a, sizeof(a)));
    }
    mc_crypto_wipe(&hi, sizeof(hi));
  }
  memcpy(&h, ids[0].internal, sizeof(h));
  mc_sha256_init(&s);
  mc_sha256_update(&s, JOB_SECRET_LABEL, sizeof(JOB_SECRET_LABEL) - 1);
  mc_sha256_update(&s, &n, sizeof(n));
  for (int i = 0; i < n_ids; i++) {
    struct mc_boot_handle hi;
    memcpy(&hi, ids[i].internal, sizeof(hi));
    mc_sha256_update(&s, &hi.magic, sizeof(hi.magic));
    mc_sha256_update(&s, hi.secret, sizeof(hi.secret));
    mc_crypto_wipe(&hi, sizeof(hi));
  }
  mc_sha256_final(&s, h.secret);
  mc_crypto_wipe(&s, sizeof(s));
  h.n_ranks = 0;
  h.secret_source = MC_BOOT_SECRET_RANDOM;
  memset(&job, 0, sizeof(job));
  memcpy(job.internal, &h, sizeof(h));
  mc_crypto_wipe(&h, sizeof(h));
  *job_out = job;
  return ncclSuccess;
}
