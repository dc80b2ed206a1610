/* inbox.c: placeholder until implemented */
#include "durable.h"
PG_FUNCTION_INFO_V1(durable_inbox_admit);
Datum durable_inbox_admit(PG_FUNCTION_ARGS) { ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("not implemented yet"))); }
PG_FUNCTION_INFO_V1(durable_inbox_claim);
Datum durable_inbox_claim(PG_FUNCTION_ARGS) { ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("not implemented yet"))); }
PG_FUNCTION_INFO_V1(durable_inbox_heartbeat);
Datum durable_inbox_heartbeat(PG_FUNCTION_ARGS) { ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("not implemented yet"))); }
PG_FUNCTION_INFO_V1(durable_inbox_complete);
Datum durable_inbox_complete(PG_FUNCTION_ARGS) { ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("not implemented yet"))); }
PG_FUNCTION_INFO_V1(durable_inbox_complete_batch);
Datum durable_inbox_complete_batch(PG_FUNCTION_ARGS) { ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("not implemented yet"))); }
PG_FUNCTION_INFO_V1(durable_inbox_fail);
Datum durable_inbox_fail(PG_FUNCTION_ARGS) { ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("not implemented yet"))); }
PG_FUNCTION_INFO_V1(durable_inbox_release);
Datum durable_inbox_release(PG_FUNCTION_ARGS) { ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("not implemented yet"))); }
PG_FUNCTION_INFO_V1(durable_inbox_replay);
Datum durable_inbox_replay(PG_FUNCTION_ARGS) { ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("not implemented yet"))); }
