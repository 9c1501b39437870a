/* Scoped cleanup for locals (GCC/Clang cleanup attribute), after nbdkit's
 * common/utils/cleanup.h. */
#ifndef TROMCHO_CLEANUP_H
#define TROMCHO_CLEANUP_H
#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <unistd.h>
#include <pthread.h>

static inline void tc_cleanup_free(void *p) { free(*(void **) p); }
static inline void tc_cleanup_fclose(FILE **f) { if (*f) fclose(*f); }
static inline void tc_cleanup_close(int *fd) { if (*fd >= 0) close(*fd); }
static inline void tc_cleanup_unlock(pthread_mutex_t **m) { if (*m) pthread_mutex_unlock(*m); }
static inline void tc_cleanup_errno(int *e) { errno = *e; }

#define CLEANUP_FREE __attribute__((cleanup(tc_cleanup_free)))
#define CLEANUP_FCLOSE __attribute__((cleanup(tc_cleanup_fclose)))
#define CLEANUP_CLOSE __attribute__((cleanup(tc_cleanup_close)))

#define TC_CONCAT_(a, b) a##b
#define TC_CONCAT(a, b) TC_CONCAT_(a, b)
/* errno as it is here comes back when the enclosing scope ends, whatever the
 * cleanup calls after this line do to it (after a return's value is taken):
 *   if (r < 0) { KEEP_ERRNO; store_free(st); return -1; } */
#define KEEP_ERRNO __attribute__((cleanup(tc_cleanup_errno), unused)) int TC_CONCAT(_errno_, __LINE__) = errno
/* Holds mutex m until the end of the enclosing scope. */
#define SCOPED_LOCK(m) \
  __attribute__((cleanup(tc_cleanup_unlock), unused)) pthread_mutex_t *TC_CONCAT(_lock_, __LINE__) = \
    (pthread_mutex_lock(m), (m))

#endif
