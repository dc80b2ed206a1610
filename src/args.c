/*-------------------------------------------------------------------------
 *
 * args.c
 *		Checks of the API's arguments.
 *
 * The API functions are not STRICT: a NULL where a value is required must
 * raise 22023 (invalid_parameter_value) naming the argument, never return a
 * NULL that looks like success.  Every check here happens before anything
 * is journaled.
 *
 * IDENTIFICATION
 *	  src/args.c
 *
 *-------------------------------------------------------------------------
 */
#include "durable.h"

#include "common/int128.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"

/* hint, when not NULL, tells the caller what to pass instead */
static void
args_null_hinted(const char *name, const char *hint)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("%s cannot be null", name),
			 hint ? errhint("%s", hint) : 0));
}

static void
args_null(const char *name)
{
	args_null_hinted(name, NULL);
}

static Datum
args_check_id(Datum d, const char *name, const char *hint_empty, const char *hint_long)
{
	text	   *t = DatumGetTextPP(d);
	Size		len = VARSIZE_ANY_EXHDR(t);

	if (len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s cannot be empty", name),
				 hint_empty ? errhint("%s", hint_empty) : 0));
	if (len > DURABLE_MAX_ID_BYTES)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s is too long (%zu bytes)", name, len),
				 errdetail("Ids, keys and names are limited to %d bytes.", DURABLE_MAX_ID_BYTES),
				 hint_long ? errhint("%s", hint_long) : 0));
	return PointerGetDatum(t);
}

/*
 * A duration of us microseconds as text in its largest exact unit ("20 ms",
 * "7 days"), independent of the session's IntervalStyle.
 */
static char *
args_duration_text(int64 us)
{
	if (us != 0 && us % USECS_PER_DAY == 0)
		return psprintf(INT64_FORMAT " days", us / USECS_PER_DAY);
	if (us != 0 && us % USECS_PER_HOUR == 0)
		return psprintf(INT64_FORMAT " h", us / USECS_PER_HOUR);
	if (us != 0 && us % USECS_PER_MINUTE == 0)
		return psprintf(INT64_FORMAT " min", us / USECS_PER_MINUTE);
	if (us != 0 && us % USECS_PER_SEC == 0)
		return psprintf(INT64_FORMAT " s", us / USECS_PER_SEC);
	if (us % 1000 == 0)
		return psprintf(INT64_FORMAT " ms", us / 1000);
	return psprintf(INT64_FORMAT " us", us);
}

Datum
durable_arg_id(FunctionCallInfo fcinfo, int argno, const char *name)
{
	return durable_arg_id_hinted(fcinfo, argno, name, NULL, NULL);
}

Datum
durable_arg_id_hinted(FunctionCallInfo fcinfo, int argno, const char *name,
					  const char *hint_missing, const char *hint_long)
{
	if (PG_ARGISNULL(argno))
		args_null_hinted(name, hint_missing);
	return args_check_id(PG_GETARG_DATUM(argno), name, hint_missing, hint_long);
}

bool
durable_arg_id_or_null(FunctionCallInfo fcinfo, int argno, const char *name, Datum *value)
{
	if (PG_ARGISNULL(argno))
	{
		*value = (Datum) 0;
		return false;
	}
	*value = args_check_id(PG_GETARG_DATUM(argno), name, NULL, NULL);
	return true;
}

/*
 * A handler's error text is clipped, not refused: refusing would make the
 * report of a failing handler fail, on the path least tested.  Unclipped, a
 * client role could store any amount in every record it fails.
 */
Datum
durable_arg_error(FunctionCallInfo fcinfo, int argno, int *clipped_from)
{
	text	   *error;
	int			bytes;
	int			kept;
	char	   *marker;
	StringInfoData clipped;

	if (PG_ARGISNULL(argno))
		args_null("error");
	error = PG_GETARG_TEXT_PP(argno);
	bytes = VARSIZE_ANY_EXHDR(error);
	*clipped_from = 0;
	if (bytes <= durable_max_error_bytes)
		return PointerGetDatum(error);

	/* The marker's digits are at most those of bytes: it is sized for them */
	marker = psprintf(" [durable clipped %d bytes]", bytes);
	kept = pg_mbcliplen(VARDATA_ANY(error), bytes, durable_max_error_bytes - strlen(marker));
	marker = psprintf(" [durable clipped %d bytes]", bytes - kept);
	initStringInfo(&clipped);
	appendBinaryStringInfo(&clipped, VARDATA_ANY(error), kept);
	appendStringInfoString(&clipped, marker);
	*clipped_from = bytes;
	return PointerGetDatum(cstring_to_text_with_len(clipped.data, clipped.len));
}

void
durable_error_clipped(int clipped_from, Datum error)
{
	if (clipped_from == 0)
		return;
	ereport(WARNING,
			(errcode(ERRCODE_WARNING_STRING_DATA_RIGHT_TRUNCATION),
			 errmsg("error text clipped from %d to %d bytes", clipped_from,
					(int) VARSIZE_ANY_EXHDR(DatumGetPointer(error))),
			 errdetail("A record keeps at most durable.max_error_bytes (%d bytes) of error text, ending with a marker that says how much was clipped.",
					   durable_max_error_bytes)));
}

int64
durable_arg_int64(FunctionCallInfo fcinfo, int argno, const char *name)
{
	if (PG_ARGISNULL(argno))
		args_null(name);
	return PG_GETARG_INT64(argno);
}

int32
durable_arg_int32(FunctionCallInfo fcinfo, int argno, const char *name)
{
	if (PG_ARGISNULL(argno))
		args_null(name);
	return PG_GETARG_INT32(argno);
}

bool
durable_arg_bool(FunctionCallInfo fcinfo, int argno, const char *name)
{
	if (PG_ARGISNULL(argno))
		args_null(name);
	return PG_GETARG_BOOL(argno);
}

/*
 * How many bytes the numbers of `j` take written out, counted up to the
 * first number that takes the count past `limit`.  jsonb keeps a number in
 * a few bytes however many digits it has (1e131071: 16 bytes stored,
 * 131,072 written out), and every reader of a journaled payload writes it
 * out (jsonb_send too: the binary protocol carries jsonb as text).  A few
 * thousand such numbers, well within any size limit, made every claim
 * that reached the record run for seconds and fail out of memory: a record
 * that no claim could lease, fail or dead-letter, holding up its queue.
 */
static Size
args_jsonb_numbers_text(Jsonb *j, Size limit)
{
	JsonbIterator *it = JsonbIteratorInit(&j->root);
	JsonbValue	v;
	JsonbIteratorToken token;
	Size		total = 0;

	while (total <= limit && (token = JsonbIteratorNext(&it, &v, false)) != WJB_DONE)
	{
		char	   *text;

		if ((token != WJB_VALUE && token != WJB_ELEM) || v.type != jbvNumeric)
			continue;
		text = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(v.val.numeric)));
		total += strlen(text);
		pfree(text);
	}
	return total;
}

Datum
durable_arg_jsonb(FunctionCallInfo fcinfo, int argno, const char *name, Size *bytes)
{
	Jsonb	   *j;

	if (PG_ARGISNULL(argno))
		args_null(name);
	j = PG_GETARG_JSONB_P(argno);
	if (bytes)
		*bytes = VARSIZE(j);
	return JsonbPGetDatum(j);
}

static Size
args_payload_numbers_limit(void)
{
	return Min((Size) durable_max_payload_bytes * DURABLE_PAYLOAD_NUMBERS_FACTOR,
			   DURABLE_PAYLOAD_NUMBERS_MAX);
}

/*
 * Whether payload's numbers take more than DURABLE_PAYLOAD_NUMBERS_FACTOR
 * times durable.max_payload_bytes written out (at most
 * DURABLE_PAYLOAD_NUMBERS_MAX): slack for payloads that are mostly long
 * numbers, far below what breaks a reader.  Such a payload is not journaled
 * (durable_refuse_payload_numbers).
 */
bool
durable_payload_numbers_too_long(Datum payload)
{
	Size		limit = args_payload_numbers_limit();

	return args_jsonb_numbers_text(DatumGetJsonbP(payload), limit) > limit;
}

/* Raise 54000 for a payload whose numbers are too long to journal. */
void
durable_refuse_payload_numbers(Datum payload, const char *name)
{
	ereport(ERROR,
			(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
			 errmsg("%s has numbers too long to journal", name),
			 errdetail("Its numbers take more than %zu bytes written out (%d times durable.max_payload_bytes), though the %s is stored in %u bytes.",
					   args_payload_numbers_limit(), DURABLE_PAYLOAD_NUMBERS_FACTOR, name,
					   (unsigned) VARSIZE(DatumGetJsonbP(payload))),
			 errhint("Send numbers of that many digits as strings.")));
}

int64
durable_arg_interval_us(FunctionCallInfo fcinfo, int argno, const char *name,
						int64 default_us, int64 min_us, int64 max_us)
{
	Interval   *iv;
	INT128		span;
	int64		us;

	if (PG_ARGISNULL(argno))
		return default_us;
	iv = PG_GETARG_INTERVAL_P(argno);
#ifdef INTERVAL_NOT_FINITE
	/* PostgreSQL 17 has infinite intervals. */
	if (INTERVAL_NOT_FINITE(iv))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be finite", name)));
#endif

	/*
	 * The parts summed in 128 bits (a month counts 30 days), as interval
	 * comparison does: parts that overflow 64 bits may still cancel out.  A
	 * sum beyond 64 bits is far beyond every limit we accept, on its side.
	 */
	span = int64_to_int128(iv->time);
	int128_add_int64_mul_int64(&span, iv->day, USECS_PER_DAY);
	int128_add_int64_mul_int64(&span, iv->month, 30 * USECS_PER_DAY);
	if (int128_compare(span, int64_to_int128(PG_INT64_MAX)) > 0)
		us = PG_INT64_MAX;
	else if (int128_compare(span, int64_to_int128(PG_INT64_MIN)) < 0)
		us = PG_INT64_MIN;
	else
		us = int128_to_int64(span);

	if (us < 0 && min_us >= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s cannot be negative", name)));
	if (us < min_us)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be at least %s", name,
						args_duration_text(min_us))));
	if (us > max_us)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be at most %s", name,
						args_duration_text(max_us))));
	return us;
}

/* An interval of exactly us microseconds (no days or months: no calendar). */
Datum
durable_interval_datum(int64 us)
{
	Interval   *iv = (Interval *) palloc0(sizeof(Interval));

	iv->time = us;
	return IntervalPGetDatum(iv);
}

bool
durable_lease_stamped_before_wait(TimestampTz lease_until, int64 lease_us)
{
	return GetCurrentTimestamp() - (lease_until - lease_us) > lease_us / 10;
}

int64
durable_arg_lease_us(FunctionCallInfo fcinfo, int argno)
{
	return durable_arg_interval_us(fcinfo, argno, "lease",
								   (int64) durable_lease_ms * 1000,
								   DURABLE_MIN_LEASE_US, DURABLE_MAX_LEASE_US);
}

int64
durable_arg_wait_us(FunctionCallInfo fcinfo, int argno)
{
	return durable_arg_interval_us(fcinfo, argno, "wait", 0, 0, DURABLE_MAX_WAIT_US);
}
