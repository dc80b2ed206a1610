/* instance.c: placeholder until implemented */
#include "durable.h"
PG_FUNCTION_INFO_V1(durable_instance_start);
Datum durable_instance_start(PG_FUNCTION_ARGS) { ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("not implemented yet"))); }
