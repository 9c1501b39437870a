/* Growable arrays, after nbdkit's common/utils/vector.h.
 *
 * One growth rule for the whole tree (double, at least min_cap, overflow
 * checked), either on a typed vector:
 *
 *   TC_VECTOR(u64_vec, uint64_t);
 *   u64_vec v = { 0 };
 *   if (u64_vec_append(&v, 42) < 0) ...   // -1, errno ENOMEM or EOVERFLOW
 *   for (size_t i = 0; i < v.len; i++) use(v.ptr[i]);
 *   u64_vec_reset(&v);
 *
 * or, for an array already spread over a struct's fields, on its pointer
 * and capacity directly (tc_grow). Neither sets tc_error: the caller names
 * what it was growing. */
#ifndef TROMCHO_VECTOR_H
#define TROMCHO_VECTOR_H
#include <stddef.h>
#include <stdlib.h>

/* Make room for need elements of elem bytes in *ptrp (capacity *cap),
 * growing to at least min_cap. 0, or -1 with errno set (nothing changed). */
int tc_grow(void *ptrp, size_t *cap, size_t need, size_t elem, size_t min_cap);

#define TC_VECTOR(name, type)                                                                   \
  typedef struct name {                                                                         \
    type *ptr;                                                                                  \
    size_t len, cap;                                                                            \
  } name;                                                                                       \
  /* Room for n more elements. */                                                               \
  static inline __attribute__((unused)) int name##_reserve(name *v, size_t n)                  \
  {                                                                                             \
    return tc_grow(&v->ptr, &v->cap, v->len + n < v->len ? (size_t) -1 : v->len + n,          \
                   sizeof(type), 0);                                                            \
  }                                                                                             \
  static inline __attribute__((unused)) int name##_append(name *v, type e)                     \
  {                                                                                             \
    if (name##_reserve(v, 1) < 0)                                                               \
      return -1;                                                                                \
    v->ptr[v->len++] = e;                                                                       \
    return 0;                                                                                   \
  }                                                                                             \
  /* Free the elements' storage (not what they point to). */                                    \
  static inline __attribute__((unused)) void name##_reset(name *v)                             \
  {                                                                                             \
    free(v->ptr);                                                                               \
    v->ptr = NULL;                                                                              \
    v->len = v->cap = 0;                                                                        \
  }

#endif
