/* The message a watch stream (watch.c, proxy_watch.c) has queued for its
 * client: {"result": ...} and a newline, handed to libmicrohttpd's content
 * reader piece by piece. */
#ifndef TROMCHO_WATCH_OUT_H
#define TROMCHO_WATCH_OUT_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <json-c/json.h>

struct watch_out {
  char *buf;
  size_t len, pos;
  int64_t sent_ms;   /* tc_now_ms() of the last message queued */
};

/* Queue {"result": result}\n in place of the message sent; takes result
 * (NULL counts as out of memory). 0, or -1 with nothing queued. */
int watch_out_emit(struct watch_out *o, json_object *result);
/* Whether all of the message has been taken. */
bool watch_out_empty(const struct watch_out *o);
/* Up to max bytes of the message into buf: how many. */
size_t watch_out_take(struct watch_out *o, char *buf, size_t max);
void watch_out_free(struct watch_out *o);

#endif
