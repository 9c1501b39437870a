/* Helpers the C tests and test tools share: hex, whole input, pseudo-random
 * data and the sector contents the store tests write. Plain C (no
 * libtromcho), so every test program can use it. */
#ifndef TROMCHO_TESTLIB_H
#define TROMCHO_TESTLIB_H
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Print "PROG: message" on stderr and exit(1). */
_Noreturn void tl_die(const char *prog, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Decode hex (exactly want bytes; want == SIZE_MAX: any even length) into a
 * new buffer, its length in *got. Bad input names what (the argument or
 * test vector) and the offset, then exits. */
uint8_t *tl_unhex(const char *prog, const char *what, const char *hex, size_t want, size_t *got);
/* All of f into a new buffer; exits on a read error. */
uint8_t *tl_read_all(const char *prog, FILE *f, size_t *len);
/* Pseudo-random numbers from a state the caller keeps (any seed). */
uint64_t tl_splitmix(uint64_t *state);
uint64_t tl_xorshift(uint64_t *state);   /* state must not be 0 */
void tl_fill_random(uint64_t *state, uint8_t *p, size_t n);
/* The content of one size-byte sector of inode at inode sector s, written
 * with version v: a 24-byte header (v, inode, s), then bytes derived from it. */
void tl_fill_sector(uint8_t *p, size_t size, uint64_t inode, uint64_t s, uint64_t v);

#endif
