/* sweep.c: placeholder until implemented */
#include "durable.h"
PG_FUNCTION_INFO_V1(durable_sweep);
Datum durable_sweep(PG_FUNCTION_ARGS) { ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("not implemented yet"))); }
PG_FUNCTION_INFO_V1(durable_purge);
Datum durable_purge(PG_FUNCTION_ARGS) { ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("not implemented yet"))); }
