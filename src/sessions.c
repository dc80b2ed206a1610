/* sessions.c: placeholder until implemented */
#include "durable.h"
PG_FUNCTION_INFO_V1(durable_session_save);
Datum durable_session_save(PG_FUNCTION_ARGS) { ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("not implemented yet"))); }
PG_FUNCTION_INFO_V1(durable_session_load);
Datum durable_session_load(PG_FUNCTION_ARGS) { ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("not implemented yet"))); }
