#!/usr/bin/env bash
# Runs the same three JVMs as `caffeine up` (caffeine/runtime/catalogue.py), in one container (its
# fourth piece, the timestamp oracle, runs in the compose file's `oracle` service):
#   hbase    HMaster start (standalone: master + region server + ZooKeeper)
#   thrift1  thrift.ThriftServer  -p 9090 --infoport 9095 -threadpool
#   thrift2  thrift2.ThriftServer -p 9091 --infoport 9096 -threadpool
# with the same jars (pom.xml), hbase-site.xml keys, log4j2.properties and JVM flags. The
# differences are container ones: everything binds 0.0.0.0 (the compose file publishes the
# ports on the host's 127.0.0.1 only) and the master/region server web UIs are on.
#
# On SIGTERM (docker stop) it stops Thrift2, Thrift1, then asks the master for a clean cluster
# shutdown, which flushes the memstores into /data: on a local filesystem the WAL alone is not
# durable. If any JVM dies, the others are stopped and the container exits non-zero.
set -euo pipefail

HB=/opt/hbase
LIB="$HB/lib"
CONF="$HB/conf"
MASTER_HEAP="${MASTER_HEAP:-3g}"
THRIFT_HEAP="${THRIFT_HEAP:-384m}"
STOP_TIMEOUT="${STOP_TIMEOUT:-60}"

# shellcheck disable=SC2207  # flags never contain spaces; comments are dropped first
FLAGS=($(grep -v '^[[:space:]]*#' "$HB/jvm.flags"))
mkdir -p "$HB/tmp/hbase" /data/hbase /data/zookeeper

jvm() {  # jvm PIECE HEAP MAIN-CLASS ARGS...: the java command of one piece (as process.java_command)
  local piece=$1 heap=$2
  shift 2
  java "-Xmx$heap" "${FLAGS[@]}" \
    "-Djava.io.tmpdir=$HB/tmp" \
    "-Dlog4j2.configurationFile=$CONF/log4j2.properties" \
    "-Dcaffeine.home=$HB" "-Dcaffeine.piece=$piece" \
    -cp "$CONF:$LIB/*" "$@"
}

log() { echo "[entrypoint] $*" >&2; }

wait_exit() {  # wait_exit PID SECONDS: 0 once PID is gone, 1 if it is still there after SECONDS
  local pid=$1 ticks=$(( $2 * 2 ))
  while kill -0 "$pid" 2>/dev/null; do
    (( ticks-- > 0 )) || return 1
    sleep 0.5
  done
  return 0
}

stop_pid() {  # stop_pid NAME PID: SIGTERM, wait STOP_TIMEOUT s, then SIGKILL
  local name=$1 pid=$2
  kill -0 "$pid" 2>/dev/null || return 0
  log "stopping $name (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  if ! wait_exit "$pid" "$STOP_TIMEOUT"; then
    log "$name did not exit ${STOP_TIMEOUT}s after SIGTERM; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
}

stopping=0
shutdown() {
  (( stopping )) && return
  stopping=1
  stop_pid thrift2 "$THRIFT2_PID"
  stop_pid thrift1 "$THRIFT1_PID"
  if kill -0 "$MASTER_PID" 2>/dev/null; then
    log "stopping hbase: HMaster stop --shutDownCluster (flushes memstores)"
    jvm hbase-stop 256m org.apache.hadoop.hbase.master.HMaster stop --shutDownCluster &
    local stopper=$!
    if ! wait_exit "$stopper" "$STOP_TIMEOUT"; then
      log "the stop request hung; falling back to SIGTERM"
      kill -KILL "$stopper" 2>/dev/null || true
    elif ! wait_exit "$MASTER_PID" "$STOP_TIMEOUT"; then
      log "hbase did not exit after the stop request; falling back to SIGTERM"
    fi
    wait "$stopper" 2>/dev/null || true
    stop_pid hbase "$MASTER_PID"
  fi
  log "stopped"
}
trap 'shutdown; exit 0' TERM INT

jvm hbase "$MASTER_HEAP" org.apache.hadoop.hbase.master.HMaster start &
MASTER_PID=$!
jvm thrift1 "$THRIFT_HEAP" org.apache.hadoop.hbase.thrift.ThriftServer \
  -b 0.0.0.0 -p 9090 --infoport 9095 -threadpool start &
THRIFT1_PID=$!
jvm thrift2 "$THRIFT_HEAP" org.apache.hadoop.hbase.thrift2.ThriftServer \
  -b 0.0.0.0 -p 9091 --infoport 9096 -threadpool start &
THRIFT2_PID=$!
log "started hbase (pid $MASTER_PID), thrift1 (pid $THRIFT1_PID), thrift2 (pid $THRIFT2_PID)"

# Any JVM exiting on its own is a failure: stop the others and let Docker report it.
set +e
wait -n "$MASTER_PID" "$THRIFT1_PID" "$THRIFT2_PID"
code=$?
set -e
if (( ! stopping )); then
  log "a JVM exited unexpectedly (exit code $code); stopping the others"
  shutdown
  exit 1
fi
