/* Leases: granted TTLs are stored; deadlines live in memory and restart at
 * the full TTL when the gateway starts (as etcd does on a new leader). An
 * expired lease is revoked like /v3/lease/revoke: its keys are deleted in
 * one revision and watchers see the deletes. */
#ifndef TROMCHO_LEASE_H
#define TROMCHO_LEASE_H
#include <json-c/json.h>
#include "kvexec.h"

struct leases;

struct leases *leases_start(struct kvs *s);
void leases_stop(struct leases *l);

json_object *lease_grant(struct leases *l, const struct caller *who, const struct kv_lease_req *r, struct kv_err *err);
json_object *lease_revoke(struct leases *l, const struct caller *who, const struct kv_lease_req *r, struct kv_err *err);
/* The inner result of a keepalive (the caller wraps it in "result"). */
json_object *lease_keepalive(struct leases *l, const struct caller *who, const struct kv_lease_req *r, struct kv_err *err);
json_object *lease_timetolive(struct leases *l, const struct caller *who, const struct kv_lease_req *r, struct kv_err *err);
/* The owner tag of a caller under use_perms ("user:alice", "osd:CN"), or
 * false when unfiltered (trusted: may act on every lease). */
bool lease_owner_tag(const struct caller *who, char *buf, size_t len);
json_object *lease_list(struct leases *l, const struct caller *who, struct kv_err *err);

#endif
