/* permit.c: placeholder until implemented */
#include "durable.h"
PG_FUNCTION_INFO_V1(durable_permit);
Datum durable_permit(PG_FUNCTION_ARGS) { ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("not implemented yet"))); }
#include "permit.h"
int64 durable_permit_expire(TimestampTz now, int limit) { return 0; }
