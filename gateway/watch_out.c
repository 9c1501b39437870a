/* A watch stream's queued message (watch_out.h). */
#include <config.h>
#include <stdlib.h>
#include <string.h>
#include "watch_out.h"
#include "evloop.h"

int
watch_out_emit(struct watch_out *o, json_object *result)
{
  json_object *m = result ? json_object_new_object() : NULL;
  if (!m) {
    json_object_put(result);
    o->len = o->pos = 0;
    return -1;
  }
  json_object_object_add(m, "result", result);
  size_t len;
  const char *s = json_object_to_json_string_length(m, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
  free(o->buf);
  o->buf = s ? malloc(len + 1) : NULL;
  o->len = o->pos = 0;
  if (!o->buf) {
    json_object_put(m);
    return -1;
  }
  memcpy(o->buf, s, len);
  o->buf[len] = '\n';
  o->len = len + 1;
  o->sent_ms = (int64_t) tc_now_ms();
  json_object_put(m);
  return 0;
}

bool
watch_out_empty(const struct watch_out *o)
{
  return o->pos >= o->len;
}

size_t
watch_out_take(struct watch_out *o, char *buf, size_t max)
{
  size_t n = o->len - o->pos;
  if (n > max)
    n = max;
  memcpy(buf, o->buf + o->pos, n);
  o->pos += n;
  return n;
}

void
watch_out_free(struct watch_out *o)
{
  free(o->buf);
  o->buf = NULL;
  o->len = o->pos = 0;
}
