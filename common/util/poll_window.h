/* How long an idle thread polls before it sleeps, adapted to what the
 * polls find (the rule of KVM's halt polling). Polling pays only when the
 * next event comes within the window: then the reply reaches a vCPU that is
 * still awake, with no wake-up (a VM exit on a VM). When events come
 * further apart than the longest window (a guest's QD1 requests, a
 * trickle), each poll is CPU taken from the threads that have work, for
 * nothing; so the window shrinks to none, and grows back once idle
 * periods are short again.
 *
 *   idle <= cur          the poll caught it: keep the window
 *   cur < idle <= max    a longer poll would have: double it (from 10 us)
 *   idle > max           no poll would have: halve it (under 10 us: none)
 *
 * idle is the time from the first look to the event (or the timeout). */
#ifndef TROMCHO_POLL_WINDOW_H
#define TROMCHO_POLL_WINDOW_H
#include <stdint.h>

#define TC_POLL_WINDOW_MIN_NS 10000u

static inline uint64_t
tc_poll_window_adapt(uint64_t cur, uint64_t max, uint64_t idle)
{
  if (!max)
    return 0;
  if (idle <= cur)
    return cur;
  if (idle <= max) {
    uint64_t next = cur ? cur * 2 : TC_POLL_WINDOW_MIN_NS;
    return next < max ? next : max;
  }
  cur /= 2;
  return cur < TC_POLL_WINDOW_MIN_NS ? 0 : cur;
}

#endif
