#!/usr/bin/env bash
# The OSD store survives kill -9 at random moments: after each kill the
# reopened store holds every synced write, every sector is the synced state
# or a later write's (never garbage), and the whole store is the state after
# one prefix of the op log (see store-torture.c). Odd rounds are killed from
# outside after a random delay (mostly landing in a sync); even rounds kill
# themselves after a random op, inside a batch. Every third round syncs on
# a second thread while the writes go on (group commit: writes made during
# a commit's flushes join the next batch). The store is small so that
# freed sectors are reused quickly.
. "${top_srcdir:-$(dirname "$0")/..}/tests/functions.sh"
requires tromcho
torture=${top_builddir}/tests/store-torture
[ -x "$torture" ] || { echo "$0: skipped: store-torture not built"; exit 77; }

data=$TESTDIR/osd.data
tromcho osd-create --data "$data" --osd_num 1 --size 16M >/dev/null || fail "osd-create"
rounds=${STORE_CRASH_ROUNDS:-12}
for round in $(seq "$rounds"); do
  log=$TESTDIR/round$round.log
  every=$(( RANDOM % 16 + 1 ))     # sync every 1..16 ops
  mode=run; [ $(( round % 3 )) = 0 ] && mode=run-async
  if [ $(( round % 2 )) = 1 ]; then
    "$torture" $mode "$data" "$RANDOM$round" $(( round * 10000000 )) 200000 "$every" > "$log" &
    pid=$!
    cleanup_fn "kill -9 $pid 2>/dev/null"
    ms=$(( 100 + RANDOM % 600 ))
    sleep "$(( ms / 1000 )).$(printf %03d $(( ms % 1000 )))"
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null
    how="killed after $ms ms"
  else
    die=$(( 100 + RANDOM % 1500 ))
    "$torture" $mode "$data" "$RANDOM$round" $(( round * 10000000 )) 200000 "$every" "$die" > "$log"
    how="killed itself after op $die"
  fi
  writes=$(grep -c '^W' "$log" || true)
  syncs=$(grep -c '^S' "$log" || true)
  echo "round $round ($mode): sync every $every, $how, $writes writes started, $syncs syncs acknowledged"
  [ "$writes" -gt 0 ] || fail "round $round: the driver wrote nothing"
  "$torture" verify "$data" "$TESTDIR/baseline" < "$log" || fail "round $round: verification failed"
done
expect_fail "already formatted" tromcho osd-create --data "$data" --osd_num 1
echo "test-store-crash: ok"
