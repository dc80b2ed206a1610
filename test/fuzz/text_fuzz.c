/*-------------------------------------------------------------------------
 *
 * text_fuzz.c
 *		libFuzzer harness for durablectl's text handling (cli/text.c): the
 *		terminal escaping and the JSON object check of NOTIFY payloads.
 *
 * Both read text that anyone who can connect may write, so besides memory
 * errors and undefined behaviour (AddressSanitizer, UBSan) it checks what
 * they promise:
 *
 * - shown_char(), shown_alloc(): each character's escape fits
 *   SHOWN_CHAR_MAX bytes; the output holds no control byte, no invalid UTF-8
 *   and no character that steers a terminal, and unescaping it gives back
 *   the input exactly (no two texts are shown alike, nothing is lost);
 * - json_object_payload(): an accepted payload starts with '{' and holds no
 *   control byte but tabs (whitespace); with trailing blanks it is still
 *   accepted, with anything else appended, or a comma before its closing
 *   brace, it is not;
 * - put_json_string(), put_json_object(): what they write is an accepted
 *   JSON value, valid UTF-8, with no control and no steering character.
 *
 * It includes text.c itself to reach its static UTF-8 decoder.
 *
 *	 test/fuzz/run               # builds, replays the corpus, fuzzes 20 s
 *
 * IDENTIFICATION
 *	  test/fuzz/text_fuzz.c
 *
 *-------------------------------------------------------------------------
 */
#define _GNU_SOURCE			/* open_memstream */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../cli/text.c"

#define CHECK(cond) do { if (!(cond)) __builtin_trap(); } while (0)

static int
hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	CHECK(false);				/* shown_alloc() writes lower-case hex only */
	return 0;
}

/* Undo shown_alloc()'s escapes; the result is allocated. */
static char *
unescape(const char *s)
{
	char	   *out = malloc(strlen(s) + 1);
	char	   *o = out;

	CHECK(out != NULL);
	while (*s)
	{
		if (*s != '\\')
		{
			*o++ = *s++;
			continue;
		}
		if (s[1] == '\\')
		{
			*o++ = '\\';
			s += 2;
		}
		else if (s[1] == 'x')
		{
			CHECK(s[2] && s[3]);
			*o++ = (char) (hex_value(s[2]) * 16 + hex_value(s[3]));
			s += 4;
		}
		else
		{
			unsigned int cp = 0;
			int			digits = s[1] == 'U' ? 8 : 4;
			int			i;

			CHECK(s[1] == 'u' || s[1] == 'U');
			for (i = 2; i < 2 + digits; i++)
			{
				CHECK(s[i]);
				cp = cp * 16 + hex_value(s[i]);
			}
			CHECK(steering_code_point(cp));
			/* \U only beyond U+FFFF, \u only below: one way to show each */
			CHECK((digits == 8) == (cp > 0xffff));
			if (cp < 0x800)
			{
				*o++ = (char) (0xc0 | (cp >> 6));
				*o++ = (char) (0x80 | (cp & 0x3f));
			}
			else if (cp < 0x10000)
			{
				*o++ = (char) (0xe0 | (cp >> 12));
				*o++ = (char) (0x80 | ((cp >> 6) & 0x3f));
				*o++ = (char) (0x80 | (cp & 0x3f));
			}
			else
			{
				*o++ = (char) (0xf0 | (cp >> 18));
				*o++ = (char) (0x80 | ((cp >> 12) & 0x3f));
				*o++ = (char) (0x80 | ((cp >> 6) & 0x3f));
				*o++ = (char) (0x80 | (cp & 0x3f));
			}
			s += 2 + digits;
		}
	}
	*o = '\0';
	return out;
}

/* Text holds no control byte (but tabs, if allowed), no invalid UTF-8, no steering. */
static void
check_inert(const char *text, bool tabs)
{
	const unsigned char *p;

	for (p = (const unsigned char *) text; *p;)
	{
		unsigned int cp;
		size_t		len;

		CHECK((*p >= 0x20 || (tabs && *p == '\t')) && *p != 0x7f);
		if (*p < 0x80)
		{
			p++;
			continue;
		}
		len = utf8_sequence(p, &cp);
		CHECK(len > 0 && !steering_code_point(cp));
		p += len;
	}
}

static void
check_shown(const char *text)
{
	char	   *out = shown_alloc(text);
	char	   *back;
	char	   *one = malloc(SHOWN_CHAR_MAX);	/* exactly: ASan sees an overrun */
	const char *p;

	CHECK(out != NULL && one != NULL);
	for (p = text; *p;)
	{
		size_t		n;

		p += shown_char(p, one, &n);
		CHECK(n <= SHOWN_CHAR_MAX);
	}
	free(one);
	check_inert(out, false);
	back = unescape(out);
	CHECK(strcmp(back, text) == 0);
	free(back);
	free(out);
}

/* What writer writes for text, wrapped in {"v": ...} when it is a string. */
static char *
written(void (*writer) (FILE *, const char *), const char *text, bool wrap)
{
	char	   *buf = NULL;
	size_t		size = 0;
	FILE	   *out = open_memstream(&buf, &size);

	CHECK(out != NULL);
	if (wrap)
		fputs("{\"v\": ", out);
	writer(out, text);
	if (wrap)
		fputs("}", out);
	CHECK(fclose(out) == 0);
	return buf;
}

static void
check_json_output(const char *text, bool accepted)
{
	char	   *out = written(put_json_string, text, true);

	CHECK(json_object_payload(out));
	check_inert(out, false);
	free(out);
	if (!accepted)
		return;
	out = written(put_json_object, text, false);
	CHECK(json_object_payload(out));
	check_inert(out, true);
	free(out);
}

static void
check_json(const char *text, size_t len)
{
	char	   *longer;
	const unsigned char *p;
	bool		accepted = json_object_payload(text);

	check_json_output(text, accepted);
	if (!accepted)
		return;
	CHECK(text[0] == '{');
	for (p = (const unsigned char *) text; *p; p++)
		CHECK(*p >= 0x20 || *p == '\t');
	longer = malloc(len + 3);
	CHECK(longer != NULL);
	memcpy(longer, text, len);
	memcpy(longer + len, " \t", 3);
	CHECK(json_object_payload(longer));
	memcpy(longer + len, "}", 2);
	CHECK(!json_object_payload(longer));
	memcpy(longer + len, ",", 2);
	CHECK(!json_object_payload(longer));
	memcpy(longer + len, "\n", 2);
	CHECK(!json_object_payload(longer));
	/* A comma before the closing brace (the object ends the text). */
	memcpy(longer, text, len);
	memcpy(longer + len - 1, ",}", 3);
	CHECK(!json_object_payload(longer));
	free(longer);
}

int			LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char	   *text = malloc(size + 1);

	CHECK(text != NULL);
	memcpy(text, data, size);
	text[size] = '\0';
	check_shown(text);
	check_json(text, strlen(text));
	free(text);
	return 0;
}
