/* Process-wide settings for tromcho's daemons and front ends. */
#ifndef TROMCHO_TUNE_H
#define TROMCHO_TUNE_H

/* Keep large buffers (I/O payloads, encryption bounce buffers) on the heap
 * instead of glibc's default mmap/munmap per allocation above 128 KiB: each
 * 1 MiB request otherwise costs 256 page faults and a TLB shootdown.
 * Measured with bench/messenger: 128 KiB x 32 in flight roughly doubles.
 * The free memory kept is bounded (trim threshold, few arenas) so that the
 * process gives memory back after a burst. */
void tc_tune_malloc(void);

/* Free memory the heap may keep between bursts: as much as the trim
 * threshold (it was 64 MiB: free memory the processes kept resident on
 * top of their buffers). */
#define TC_TUNE_KEEP_FREE (16u << 20)
/* After a burst (a sync that freed the buffers kept for replay, a store
 * sync): give free heap memory back to the system when more than
 * TC_TUNE_KEEP_FREE is held in free chunks (fragmented chunks are never
 * trimmed by themselves). Cheap to call often: looks at most once a second. */
void tc_tune_release(void);

/* Put the calling thread under SCHED_BATCH (sched(7); option sched_batch):
 * woken, it does not preempt the thread running on its CPU. On two vCPUs
 * shared by nbdkit's workers, the client's I/O thread and the OSDs, each
 * reply the I/O thread hands to a worker otherwise preempted it in the
 * middle of its batch (bench/README.md, 2026-12-06). Threads the caller
 * creates afterwards inherit the policy. 0, or -1 with tc_error set. */
int tc_tune_sched_batch(void);

#endif
