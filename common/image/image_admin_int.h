/* Inside image administration (image_admin.c, image_rekey.c): not an API. */
#ifndef TROMCHO_IMAGE_ADMIN_INT_H
#define TROMCHO_IMAGE_ADMIN_INT_H
#include "image_admin.h"
#include "kv_client.h"

#define ATTEMPTS 32

/* Turn an --enc_key value into what the record stores (caller frees):
 * NULL for none, a new random key for "auto". */
int tc_admin_make_key(struct tc_client *cl, const char *name, const char *spec, char **out);
/* Allocate an inode number for m in m->pool and, in one transaction, put
 * m's record, /index/image/<m->name> -> it, the new maxid and the extra
 * operations, if the extra compares hold; succ (may be NULL): a record
 * that gets next_id = m's new id, put as the first extra operation (its
 * value is made here). 1 done, 0 an extra compare failed, -1 error. */
int tc_admin_alloc_txn_succ(struct tc_client *cl, struct tc_image_meta *m, const struct tc_kv_cmp *xcmp, size_t nx,
                            const struct tc_kv_op *xops0, size_t nxo, struct tc_image_meta *succ);
/* DELETE every object of inode (SEC_LIST to find them). */
int tc_admin_delete_objects(struct tc_client *cl, uint64_t inode, tc_admin_progress_fn fn, void *arg);

#endif
