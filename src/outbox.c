/* outbox.c: placeholder until implemented */
#include "durable.h"
PG_FUNCTION_INFO_V1(durable_outbox_begin);
Datum durable_outbox_begin(PG_FUNCTION_ARGS) { ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("not implemented yet"))); }
PG_FUNCTION_INFO_V1(durable_outbox_sent);
Datum durable_outbox_sent(PG_FUNCTION_ARGS) { ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("not implemented yet"))); }
PG_FUNCTION_INFO_V1(durable_outbox_failed);
Datum durable_outbox_failed(PG_FUNCTION_ARGS) { ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("not implemented yet"))); }
PG_FUNCTION_INFO_V1(durable_outbox_enqueue);
Datum durable_outbox_enqueue(PG_FUNCTION_ARGS) { ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("not implemented yet"))); }
PG_FUNCTION_INFO_V1(durable_outbox_claim);
Datum durable_outbox_claim(PG_FUNCTION_ARGS) { ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("not implemented yet"))); }
PG_FUNCTION_INFO_V1(durable_outbox_heartbeat);
Datum durable_outbox_heartbeat(PG_FUNCTION_ARGS) { ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("not implemented yet"))); }
PG_FUNCTION_INFO_V1(durable_outbox_retry);
Datum durable_outbox_retry(PG_FUNCTION_ARGS) { ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("not implemented yet"))); }
PG_FUNCTION_INFO_V1(durable_outbox_discard);
Datum durable_outbox_discard(PG_FUNCTION_ARGS) { ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("not implemented yet"))); }
