/* Process-wide settings for tromcho's daemons and front ends. */
#ifndef TROMCHO_TUNE_H
#define TROMCHO_TUNE_H

/* Keep large buffers (I/O payloads, encryption bounce buffers) on the heap
 * instead of glibc's default mmap/munmap per allocation above 128 KiB: each
 * 1 MiB request otherwise costs 256 page faults and a TLB shootdown.
 * Measured with bench/messenger: 128 KiB x 32 in flight roughly doubles. */
void tc_tune_malloc(void);

#endif
