/* An in-memory object store for unit tests of the image layer: sectors of
 * inodes in a hash table, operations completed asynchronously by two worker
 * threads so the image layer's waiting and locking are exercised. Each
 * operation is applied atomically (under one lock), like an OSD sector. */
#ifndef TROMCHO_MEMSTORE_H
#define TROMCHO_MEMSTORE_H
#include <stdbool.h>
#include "objstore.h"

struct memstore;
struct memstore *memstore_new(void);
void memstore_free(struct memstore *m);
struct tc_objstore memstore_objstore(struct memstore *m);
/* The stored bytes of one sector (NULL if absent); valid until the next write. */
const uint8_t *memstore_sector(struct memstore *m, uint64_t inode, uint64_t sector);
/* Whether any stored sector contains the given bytes. */
bool memstore_contains(struct memstore *m, const void *needle, size_t len);
/* Delay every operation by usec microseconds (0: none). */
void memstore_set_delay(struct memstore *m, unsigned usec);
/* Counters. */
unsigned long memstore_ops(struct memstore *m, enum tc_objop_code code);
/* Write-type operations (WRITE, WRITE_PARTIAL, WRITE_IF, DELETE) applied
 * with TC_OBJ_FUA (fua true) or without. */
unsigned long memstore_writes(struct memstore *m, bool fua);
#endif
