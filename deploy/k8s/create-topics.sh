#!/bin/bash
# Create the topics gpuledger needs, explicitly, with the partition counts and cleanup policies it
# expects (never rely on broker auto-creation: partition p of the checkpoint topic holds what the
# worker read from partition p of the events topic, so another partition count breaks every resume). Idempotent: existing topics are
# kept, and a topic that exists with the wrong partition count stops the script with an error.
#
# Runs in the apache/kafka image (compose service `topics`, Kubernetes Job `gpuledger-topics`).
# Settings (environment):
#   GPULEDGER_BOOTSTRAP             broker list, host:port[,host:port...]         (required)
#   GPULEDGER_APP_ID                the workers' --app-id: their consumer group and changelog prefix (default gpuledger-worker)
#   GPULEDGER_PARTITIONS            partitions of the events topic = most workers that share the load (default 12)
#   GPULEDGER_REPLICATION_FACTOR    copies of every partition (default 3)
#   GPULEDGER_EVENTS_RETENTION_MS   how long events stay on the topic (default -1: forever, they are the ledger)
#   GPULEDGER_KAFKA_SECURITY_PROTOCOL, GPULEDGER_KAFKA_SASL_MECHANISM, GPULEDGER_KAFKA_SASL_USERNAME,
#   GPULEDGER_KAFKA_SASL_PASSWORD, GPULEDGER_KAFKA_SSL_CAFILE: the same TLS/SASL settings as the workers.
set -euo pipefail

BOOTSTRAP="${GPULEDGER_BOOTSTRAP:?set GPULEDGER_BOOTSTRAP to the broker list}"
APP_ID="${GPULEDGER_APP_ID:-gpuledger-worker}"
PARTITIONS="${GPULEDGER_PARTITIONS:-12}"
RF="${GPULEDGER_REPLICATION_FACTOR:-3}"
EVENTS_RETENTION_MS="${GPULEDGER_EVENTS_RETENTION_MS:--1}"
MIN_ISR=$(( RF > 1 ? 2 : 1 ))  # with acks=all, a write needs two copies unless there is only one broker
KAFKA_BIN="${KAFKA_BIN:-/opt/kafka/bin}"

# Client settings for the admin tool: the same protocol and credentials the workers use.
CLIENT_CONFIG="$(mktemp)"
trap 'rm -f "$CLIENT_CONFIG"' EXIT
PROTOCOL="${GPULEDGER_KAFKA_SECURITY_PROTOCOL:-PLAINTEXT}"
echo "security.protocol=${PROTOCOL}" > "$CLIENT_CONFIG"
case "$PROTOCOL" in
  SASL_*)
    MECHANISM="${GPULEDGER_KAFKA_SASL_MECHANISM:-SCRAM-SHA-256}"
    if [ "$MECHANISM" = "PLAIN" ]; then MODULE=org.apache.kafka.common.security.plain.PlainLoginModule
    else MODULE=org.apache.kafka.common.security.scram.ScramLoginModule; fi
    {
      echo "sasl.mechanism=${MECHANISM}"
      echo "sasl.jaas.config=${MODULE} required username=\"${GPULEDGER_KAFKA_SASL_USERNAME:?}\" password=\"${GPULEDGER_KAFKA_SASL_PASSWORD:?}\";"
    } >> "$CLIENT_CONFIG"
    ;;
esac
if [ -n "${GPULEDGER_KAFKA_SSL_CAFILE:-}" ]; then
  { echo "ssl.truststore.type=PEM"; echo "ssl.truststore.location=${GPULEDGER_KAFKA_SSL_CAFILE}"; } >> "$CLIENT_CONFIG"
fi

topics() { "$KAFKA_BIN/kafka-topics.sh" --bootstrap-server "$BOOTSTRAP" --command-config "$CLIENT_CONFIG" "$@"; }

# create NAME PARTITIONS [--config key=value ...]
create() {
  local name="$1" partitions="$2"
  shift 2
  topics --create --if-not-exists --topic "$name" --partitions "$partitions" --replication-factor "$RF" \
    --config "min.insync.replicas=${MIN_ISR}" "$@"
  local have
  have="$(topics --describe --topic "$name" | sed -n 's/.*PartitionCount: *\([0-9]*\).*/\1/p' | head -n 1)"
  if [ "$have" != "$partitions" ]; then
    echo "topic $name has $have partition(s), expected $partitions: recreate it or change GPULEDGER_PARTITIONS" >&2
    exit 1
  fi
}

# Facts from the schedulers, keyed by cluster: one cluster's events stay ordered in one partition.
# Kept forever by default: they are the ledger, and rebuilding a worker's state from scratch needs
# every cluster's budget tree, however old (a few hundred bytes an event).
create gpuledger.events "$PARTITIONS" --config cleanup.policy=delete --config "retention.ms=${EVENTS_RETENTION_MS}"
# The decision service's outputs, keyed by cluster like their inputs.
create gpuledger.decisions "$PARTITIONS" --config cleanup.policy=delete --config retention.ms=2592000000
# Records that failed to decode or validate, with the reason in their headers: kept 30 days for inspection.
create gpuledger.deadletter 1 --config cleanup.policy=delete --config retention.ms=2592000000
# the worker's checkpoints and occupancy view, co-partitioned with the events topic; compacted, kept forever:
# one checkpoint of the decision core per cluster, and rolling occupancy per budget node.
# A busy cluster's checkpoint outgrows the default 1 MB record batch: up to 16 MiB, what the worker sends.
create "${APP_ID}-clusters-changelog" "$PARTITIONS" --config cleanup.policy=compact --config retention.ms=-1 \
  --config max.message.bytes=16777216
create "${APP_ID}-occupancy-changelog" "$PARTITIONS" --config cleanup.policy=compact --config retention.ms=-1

echo "gpuledger topics for ${APP_ID} ready on ${BOOTSTRAP} (${PARTITIONS} partitions, replication factor ${RF})"
