/* tromcho make-certs: the test and quick-setup PKI of the seed's "Quick
 * setup", made with GnuTLS (no openssl subprocess).
 *
 *   make-certs --dir DIR        osd_ca (also the OSD certificate), client_ca,
 *                               mon_ca, antietcd (gateway TLS), user admin,
 *                               DIR/osd.conf, gateway.conf, admin.conf (a
 *                               config per role) and tromcho.conf (all)
 *   make-certs user NAME --dir DIR [--admin]
 *                               a user certificate CN=NAME signed by client_ca
 *                               and DIR/NAME.conf
 *   make-certs nbd --dir DIR [--tenant T] [--user NAME] [--host H]
 *                               TLS for the NBD hop (nbdkit --tls): a CA per
 *                               tenant (T defaults to NAME, NAME to admin),
 *                               DIR/nbd-server-T/ and DIR/nbd-client-T/ in
 *                               nbdkit's and libnbd's file layout (see make_nbd)
 *
 * An existing CA is kept unless --force: replacing it would orphan every
 * certificate it signed. */
#include <config.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <json-c/json.h>
#include "certs.h"
#include "commands.h"
#include "error.h"

/* Room for DIR (at most PATH_MAX) plus a file name. */
#define MC_PATH (PATH_MAX + 64)

struct mc_opts {
  const char *dir;
  int days;
  int key_type;
  int force;
  int admin;
};

static int
exists(const char *path)
{
  struct stat st;
  return stat(path, &st) == 0;
}

static void
path_of(char *out, size_t outlen, const char *dir, const char *name, const char *ext)
{
  snprintf(out, outlen, "%s/%s.%s", dir, name, ext);
}

/* Issue DIR/name.{crt,key}; keep an existing pair unless force. Sets
 * *made when new files were written. */
static int
issue(const struct mc_opts *o, const char *name, const struct tc_cert_spec *spec,
      const char *issuer, int force, int *made)
{
  char crt[MC_PATH], key[MC_PATH], icrt[MC_PATH], ikey[MC_PATH];
  path_of(crt, sizeof crt, o->dir, name, "crt");
  path_of(key, sizeof key, o->dir, name, "key");
  *made = 0;
  if (!force && exists(crt) && exists(key)) {
    printf("kept    %s (exists; --force replaces it)\n", crt);
    return 0;
  }
  if (issuer) {
    path_of(icrt, sizeof icrt, o->dir, issuer, "crt");
    path_of(ikey, sizeof ikey, o->dir, issuer, "key");
  }
  if (tc_cert_issue(spec, o->key_type, issuer ? icrt : NULL, issuer ? ikey : NULL, crt, key) < 0) {
    fprintf(stderr, "tromcho make-certs: %s\n", tc_last_error());
    return -1;
  }
  printf("created %s, %s (CN=%s%s%s)\n", crt, key, spec->cn, issuer ? ", signed by " : ", self-signed",
         issuer ? issuer : "");
  *made = 1;
  return 0;
}

static int
set_path(json_object *conf, const char *opt, const char *dir, const char *file)
{
  char p[MC_PATH];
  snprintf(p, sizeof p, "%s/%s", dir, file);
  json_object_object_add(conf, opt, json_object_new_string(p));
  return 0;
}

/* One option of a config file and the file of DIR it names. */
struct conf_path {
  const char *opt, *file;
};

/* Write or update DIR/NAME: other options already there are kept. */
static int
write_conf_file(const char *dir, const char *name, const struct conf_path *paths)
{
  char path[MC_PATH], tmp[MC_PATH];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  snprintf(tmp, sizeof tmp, "%s/%s.tmp", dir, name);
  json_object *conf = NULL;
  if (exists(path)) {
    conf = json_object_from_file(path);
    if (!conf || !json_object_is_type(conf, json_type_object)) {
      fprintf(stderr, "tromcho make-certs: %s exists but is not a JSON object; not touching it\n", path);
      json_object_put(conf);
      return -1;
    }
  }
  else
    conf = json_object_new_object();
  for (; paths->opt; paths++)
    set_path(conf, paths->opt, dir, paths->file);
  int r = json_object_to_file_ext(tmp, conf, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE);
  json_object_put(conf);
  if (r < 0 || rename(tmp, path) < 0) {
    fprintf(stderr, "tromcho make-certs: write %s: %s\n", path, strerror(errno));
    unlink(tmp);
    return -1;
  }
  printf("wrote   %s\n", path);
  return 0;
}

/* A config per role, so that no daemon holds the admin key (DESIGN.md 2):
 *   osd.conf      the OSDs: osd_cert/osd_pkey (their KV identity too)
 *   gateway.conf  the gateway and its monitor: antietcd_cert/key, the three
 *                 CAs, mon_etcd_client_cert/key
 *   admin.conf    the administrator's CLI: cert/pkey = admin
 *   tromcho.conf  all of the above in one file, for a one-machine test setup
 * (make-certs user NAME writes NAME.conf.) */
static int
write_conf(const char *dir)
{
  static const struct conf_path osd[] = {
    { "osd_ca", "osd_ca.crt" }, { "client_ca", "client_ca.crt" },
    /* The seed allows the OSD CA to be the OSD certificate too. */
    { "osd_cert", "osd_ca.crt" }, { "osd_pkey", "osd_ca.key" }, { "etcd_ca", "antietcd.crt" }, { NULL, NULL } };
  static const struct conf_path gateway[] = {
    { "osd_ca", "osd_ca.crt" }, { "client_ca", "client_ca.crt" }, { "mon_ca", "mon_ca.crt" },
    { "antietcd_cert", "antietcd.crt" }, { "antietcd_key", "antietcd.key" }, { "etcd_ca", "antietcd.crt" },
    { "mon_etcd_client_cert", "mon_ca.crt" }, { "mon_etcd_client_key", "mon_ca.key" }, { NULL, NULL } };
  static const struct conf_path admin[] = {
    { "osd_ca", "osd_ca.crt" }, { "etcd_ca", "antietcd.crt" }, { "cert", "admin.crt" }, { "pkey", "admin.key" },
    { NULL, NULL } };
  static const struct conf_path all[] = {
    { "osd_ca", "osd_ca.crt" }, { "client_ca", "client_ca.crt" }, { "mon_ca", "mon_ca.crt" },
    { "osd_cert", "osd_ca.crt" }, { "osd_pkey", "osd_ca.key" },
    { "antietcd_cert", "antietcd.crt" }, { "antietcd_key", "antietcd.key" }, { "etcd_ca", "antietcd.crt" },
    { "mon_etcd_client_cert", "mon_ca.crt" }, { "mon_etcd_client_key", "mon_ca.key" },
    { "cert", "admin.crt" }, { "pkey", "admin.key" }, { NULL, NULL } };
  if (write_conf_file(dir, "osd.conf", osd) < 0 || write_conf_file(dir, "gateway.conf", gateway) < 0 ||
      write_conf_file(dir, "admin.conf", admin) < 0 || write_conf_file(dir, "tromcho.conf", all) < 0)
    return -1;
  return 0;
}

/* NAME.conf: a user's own config (its certificate, the CAs it checks). */
static int
write_user_conf(const char *dir, const char *name)
{
  char crt[MC_PATH], key[MC_PATH], conf[MC_PATH];
  snprintf(crt, sizeof crt, "%s.crt", name);
  snprintf(key, sizeof key, "%s.key", name);
  snprintf(conf, sizeof conf, "%s.conf", name);
  const struct conf_path user[] = {
    { "osd_ca", "osd_ca.crt" }, { "etcd_ca", "antietcd.crt" }, { "cert", crt }, { "pkey", key }, { NULL, NULL } };
  return write_conf_file(dir, conf, user);
}

static int
valid_user_name(const char *n)
{
  static const char *reserved[] = { "osd_ca", "client_ca", "mon_ca", "antietcd", "tromcho", "osd", "gateway", NULL };
  size_t len = strlen(n);
  if (len == 0 || len > 64 || n[0] == '.' || n[0] == '-')
    return 0;
  for (const char *p = n; *p; p++)
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
          *p == '.' || *p == '_' || *p == '-' || *p == '@'))
      return 0;
  for (int i = 0; reserved[i]; i++)
    if (!strcmp(n, reserved[i]))
      return 0;
  return 1;
}

static int
make_all(const struct mc_opts *o)
{
  int made_osd, made_client, made_mon, made_gw, made_admin;
  struct tc_cert_spec ca = { .is_ca = 1, .server = 1, .client = 1, .days = o->days };
  ca.cn = "tromcho osd_ca";
  if (issue(o, "osd_ca", &ca, NULL, o->force, &made_osd) < 0)
    return 1;
  ca.cn = "tromcho client_ca";
  ca.server = ca.client = 0;
  if (issue(o, "client_ca", &ca, NULL, o->force, &made_client) < 0)
    return 1;
  ca.cn = "tromcho mon_ca";
  ca.server = ca.client = 1;
  if (issue(o, "mon_ca", &ca, NULL, o->force, &made_mon) < 0)
    return 1;
  /* The gateway's TLS certificate is its own trust anchor (etcd_ca). */
  struct tc_cert_spec gw = { .cn = "tromcho-gateway", .is_ca = 1, .server = 1, .client = 1, .days = o->days };
  if (issue(o, "antietcd", &gw, NULL, o->force, &made_gw) < 0)
    return 1;
  struct tc_cert_spec admin = { .cn = "admin", .client = 1, .days = o->days };
  /* A new client_ca orphans the old admin certificate: issue a new one. */
  if (issue(o, "admin", &admin, "client_ca", o->force || made_client, &made_admin) < 0)
    return 1;
  if (write_conf(o->dir) < 0)
    return 1;
  return 0;
}

static int
make_user(const struct mc_opts *o, const char *name)
{
  char ca[MC_PATH], cakey[MC_PATH];
  if (!valid_user_name(name)) {
    fprintf(stderr, "tromcho make-certs user: '%s' is not a valid user name "
            "(1-64 of A-Z a-z 0-9 . _ - @, not a CA file name)\n", name);
    return 1;
  }
  path_of(ca, sizeof ca, o->dir, "client_ca", "crt");
  path_of(cakey, sizeof cakey, o->dir, "client_ca", "key");
  if (!exists(ca) || !exists(cakey)) {
    fprintf(stderr, "tromcho make-certs user: %s or %s missing (run tromcho make-certs --dir %s first)\n",
            ca, cakey, o->dir);
    return 1;
  }
  char crt[MC_PATH];
  path_of(crt, sizeof crt, o->dir, name, "crt");
  if (exists(crt) && !o->force) {
    fprintf(stderr, "tromcho make-certs user: %s exists (--force replaces it)\n", crt);
    return 1;
  }
  struct tc_cert_spec spec = { .cn = name, .client = 1, .days = o->days };
  int made;
  if (issue(o, name, &spec, "client_ca", 1, &made) < 0 || write_user_conf(o->dir, name) < 0)
    return 1;
  if (o->admin)
    printf("user %s is an administrator once the KV holds %s/config/user/%s = {\"type\":\"admin\"}\n",
           name, "<etcd_prefix>", name);
  return 0;
}

/* Copy src to dst with the given mode (replacing dst). */
static int
copy_file(const char *src, const char *dst, mode_t mode)
{
  FILE *in = fopen(src, "rb");
  if (!in) {
    fprintf(stderr, "tromcho make-certs: %s: %s\n", src, strerror(errno));
    return -1;
  }
  unlink(dst);
  int fd = open(dst, O_WRONLY | O_CREAT | O_EXCL, mode);
  FILE *out = fd >= 0 ? fdopen(fd, "wb") : NULL;
  if (!out) {
    fprintf(stderr, "tromcho make-certs: %s: %s\n", dst, strerror(errno));
    if (fd >= 0)
      close(fd);
    fclose(in);
    return -1;
  }
  char buf[8192];
  size_t n;
  int r = 0;
  while ((n = fread(buf, 1, sizeof buf, in)) > 0)
    if (fwrite(buf, 1, n, out) != n)
      r = -1;
  if (ferror(in))
    r = -1;
  fclose(in);
  if (fclose(out) != 0)
    r = -1;
  if (r < 0)
    fprintf(stderr, "tromcho make-certs: copying %s to %s failed\n", src, dst);
  return r;
}

/* Fill a folder in nbdkit's/libnbd's layout: ca-cert.pem = DIR/ca.crt, and
 * ROLE-cert.pem / ROLE-key.pem = DIR/name.{crt,key}. */
static int
nbd_folder(const struct mc_opts *o, const char *folder, const char *ca, const char *role, const char *name)
{
  char d[MC_PATH], src[MC_PATH], dst[MC_PATH + 32];
  snprintf(d, sizeof d, "%s/%s", o->dir, folder);
  if (mkdir(d, 0700) < 0 && errno != EEXIST) {
    fprintf(stderr, "tromcho make-certs: mkdir %s: %s\n", d, strerror(errno));
    return -1;
  }
  path_of(src, sizeof src, o->dir, ca, "crt");
  snprintf(dst, sizeof dst, "%s/ca-cert.pem", d);
  if (copy_file(src, dst, 0644) < 0)
    return -1;
  path_of(src, sizeof src, o->dir, name, "crt");
  snprintf(dst, sizeof dst, "%s/%s-cert.pem", d, role);
  if (copy_file(src, dst, 0644) < 0)
    return -1;
  path_of(src, sizeof src, o->dir, name, "key");
  snprintf(dst, sizeof dst, "%s/%s-key.pem", d, role);
  if (copy_file(src, dst, 0600) < 0)
    return -1;
  printf("wrote   %s/ (ca-cert.pem, %s-cert.pem, %s-key.pem)\n", d, role, role);
  return 0;
}

/* TLS for the NBD hop (DESIGN.md section 7): one nbdkit per tenant, and a
 * CA per tenant that signs only that tenant's NBD server and client
 * certificates -- never client_ca: an NBD certificate is not a cluster
 * identity, and one tenant's NBD client certificate must not open another
 * tenant's nbdkit.
 *   DIR/nbd-ca-TENANT.{crt,key}     the tenant's NBD CA (kept if present)
 *   DIR/nbd-server-TENANT/          nbdkit --tls=require --tls-verify-peer
 *                                   --tls-certificates=DIR/nbd-server-TENANT
 *                                   (serverAuth, CN = --host or localhost)
 *   DIR/nbd-client-TENANT/          libnbd tls-certificates= (clientAuth,
 *                                   CN = --user)
 * The nbdkit instance itself reaches the cluster as its user with cert= /
 * pkey= from client_ca, as before. */
static int
make_nbd(const struct mc_opts *o, const char *host, const char *tenant, const char *user)
{
  char ca[128], srv[128], cli[128];
  snprintf(ca, sizeof ca, "nbd-ca-%s", tenant);
  snprintf(srv, sizeof srv, "nbd-server-%s", tenant);
  snprintf(cli, sizeof cli, "nbd-client-%s", tenant);
  char cn[160];
  snprintf(cn, sizeof cn, "tromcho nbd CA %s", tenant);
  struct tc_cert_spec ca_spec = { .cn = cn, .is_ca = 1, .days = o->days };
  int made_ca, made;
  if (issue(o, ca, &ca_spec, NULL, o->force, &made_ca) < 0)
    return 1;
  const char *dns[] = { host, NULL };
  struct tc_cert_spec sspec = { .cn = host ? host : "localhost", .server = 1, .dns = host ? dns : NULL,
                                .days = o->days };
  /* A new CA orphans the old leaves: issue them again. */
  if (issue(o, srv, &sspec, ca, o->force || made_ca, &made) < 0)
    return 1;
  struct tc_cert_spec cspec = { .cn = user, .client = 1, .days = o->days };
  if (issue(o, cli, &cspec, ca, o->force || made_ca, &made) < 0)
    return 1;
  if (nbd_folder(o, srv, ca, "server", srv) < 0 || nbd_folder(o, cli, ca, "client", cli) < 0)
    return 1;
  return 0;
}

int
cmd_make_certs(int argc, char **argv, struct tc_config *cfg)
{
  struct mc_opts o = { .dir = NULL, .days = 3650, .key_type = TC_KEY_ECDSA_P256 };
  const char *user = NULL, *host = NULL, *nbd_user = "admin", *tenant = NULL;
  int nbd = 0;
  int i = 1;
  if (i < argc && !strcmp(argv[i], "nbd")) {
    nbd = 1;
    i++;
  }
  else if (i < argc && !strcmp(argv[i], "user")) {
    if (i + 1 >= argc || argv[i + 1][0] == '-') {
      fprintf(stderr, "tromcho make-certs user: missing NAME\n");
      return 1;
    }
    user = argv[i + 1];
    i += 2;
  }
  for (; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--dir") && v) { o.dir = v; i++; }
    else if (!strcmp(a, "--days") && v) {
      char *end;
      long d = strtol(v, &end, 10);
      if (*end || d < 1 || d > 36500) {
        fprintf(stderr, "tromcho make-certs: --days: '%s' is not a number of days from 1 to 36500\n", v);
        return 1;
      }
      o.days = (int) d;
      i++;
    }
    else if (!strcmp(a, "--key-type") && v) {
      o.key_type = tc_key_type_parse(v);
      if (o.key_type < 0) {
        fprintf(stderr, "tromcho make-certs: --key-type: '%s' is not one of ecdsa, ed25519, rsa\n", v);
        return 1;
      }
      i++;
    }
    else if (!strcmp(a, "--force")) o.force = 1;
    else if (!strcmp(a, "--admin") && user) o.admin = 1;
    else if (!strcmp(a, "--host") && v && nbd) { host = v; i++; }
    else if (!strcmp(a, "--user") && v && nbd) {
      if (!valid_user_name(v)) {
        fprintf(stderr, "tromcho make-certs nbd: '%s' is not a valid user name\n", v);
        return 1;
      }
      nbd_user = v;
      i++;
    }
    else if (!strcmp(a, "--tenant") && v && nbd) {
      if (!valid_user_name(v)) {
        fprintf(stderr, "tromcho make-certs nbd: '%s' is not a valid tenant name (1-64 of A-Z a-z 0-9 . _ - @)\n", v);
        return 1;
      }
      tenant = v;
      i++;
    }
    else {
      fprintf(stderr, "tromcho make-certs: unexpected argument '%s'\n"
              "usage: tromcho make-certs --dir DIR [--days N] [--key-type ecdsa|ed25519|rsa] [--force]\n"
              "       tromcho make-certs user NAME [--admin] --dir DIR [--days N] [--key-type T] [--force]\n"
              "       tromcho make-certs nbd --dir DIR [--tenant NAME] [--user NAME] [--host NAME] [--force]\n", a);
      return 1;
    }
  }
  if (!o.dir) {
    fprintf(stderr, "tromcho make-certs: --dir DIR is required\n");
    return 1;
  }
  if (mkdir(o.dir, 0755) < 0 && errno != EEXIST) {
    fprintf(stderr, "tromcho make-certs: mkdir %s: %s\n", o.dir, strerror(errno));
    return 1;
  }
  char abs[PATH_MAX];
  if (!realpath(o.dir, abs)) {
    fprintf(stderr, "tromcho make-certs: %s: %s\n", o.dir, strerror(errno));
    return 1;
  }
  o.dir = abs;
  if (nbd)
    return make_nbd(&o, host, tenant ? tenant : nbd_user, nbd_user);
  return user ? make_user(&o, user) : make_all(&o);
}
