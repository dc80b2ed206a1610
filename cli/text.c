/*-------------------------------------------------------------------------
 *
 * text.c
 *		How durablectl prints text that bots wrote: escaped for a terminal,
 *		or as JSON.
 *
 * Keys, chat ids, owners, errors and payloads are written by bots, and
 * NOTIFY payloads on durable's channels by anyone who can connect.  Printed
 * raw, such text could move the operator's cursor, hide what follows, or
 * fake whole lines of output (a forged "dlq" entry, a forged event in
 * watch --json).  So, for a terminal, every character that can steer one is
 * shown as an escape: C0 controls and DEL as \xNN, the C1 controls, the
 * line and paragraph separators and the bidirectional marks, embeddings,
 * overrides and isolates (which reorder what the eye reads) as \uXXXX, a
 * byte that is not part of valid UTF-8 as \xNN, and a backslash as \\ so
 * that an escape cannot be faked by typing one: no two texts are shown
 * alike.  Characters that show nothing (format characters, variation
 * selectors, fillers) are escaped too, \UXXXXXXXX beyond U+FFFF.  (Look-alike
 * characters remain look-alikes.)  For JSON, a payload
 * is passed through only when it is one complete JSON object on one line
 * (checked against the whole grammar); anything else is printed as a JSON
 * string; in both, the same characters are written as \uXXXX escapes, and
 * a byte that is not UTF-8 (a SQL_ASCII database sends any) as U+FFFD.
 *
 * IDENTIFICATION
 *	  cli/text.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text.h"

/* Deeper JSON than this is not durable's, and would only spend stack. */
#define JSON_MAX_DEPTH	64

/*
 * Length of the UTF-8 sequence that starts at p (1 to 4 bytes) with its code
 * point in *cp, or 0 if p does not start a valid, shortest-form sequence.
 */
static size_t
utf8_sequence(const unsigned char *p, unsigned int *cp)
{
	size_t		len;
	unsigned char lo = 0x80;
	unsigned char hi = 0xbf;
	size_t		i;

	if (p[0] >= 0xc2 && p[0] <= 0xdf)
	{
		len = 2;
		*cp = p[0] & 0x1f;
	}
	else if (p[0] >= 0xe0 && p[0] <= 0xef)
	{
		len = 3;
		*cp = p[0] & 0x0f;
		if (p[0] == 0xe0)
			lo = 0xa0;			/* shortest form */
		else if (p[0] == 0xed)
			hi = 0x9f;			/* no surrogates */
	}
	else if (p[0] >= 0xf0 && p[0] <= 0xf4)
	{
		len = 4;
		*cp = p[0] & 0x07;
		if (p[0] == 0xf0)
			lo = 0x90;			/* shortest form */
		else if (p[0] == 0xf4)
			hi = 0x8f;			/* at most U+10FFFF */
	}
	else
		return 0;
	for (i = 1; i < len; i++)
	{
		if (p[i] < lo || p[i] > hi)
			return 0;			/* also stops at the terminating zero */
		*cp = (*cp << 6) | (p[i] & 0x3f);
		lo = 0x80;
		hi = 0xbf;
	}
	return len;
}

/*
 * Whether a code point steers a terminal, reorders the text shown, or shows
 * nothing: "same" and "same" followed by a zero-width space would print
 * alike.  The invisible ones are Unicode's format characters (category Cf),
 * the variation selectors, the combining grapheme joiner and the Hangul
 * fillers.
 */
static bool
steering_code_point(unsigned int cp)
{
	return (cp >= 0x80 && cp <= 0x9f) ||	/* C1 controls: CSI, NEL, ... */
		cp == 0x061c || cp == 0x200e || cp == 0x200f ||	/* bidi marks */
		cp == 0x2028 || cp == 0x2029 || /* line, paragraph separators */
		(cp >= 0x202a && cp <= 0x202e) ||	/* bidi embeddings, overrides */
		(cp >= 0x2066 && cp <= 0x2069) ||	/* bidi isolates */
		cp == 0x00ad || cp == 0x034f || /* soft hyphen, grapheme joiner */
		(cp >= 0x0600 && cp <= 0x0605) || cp == 0x06dd || cp == 0x070f ||
		cp == 0x0890 || cp == 0x0891 || cp == 0x08e2 ||
		cp == 0x115f || cp == 0x1160 || cp == 0x3164 || cp == 0xffa0 ||	/* fillers */
		(cp >= 0x180b && cp <= 0x180f) ||	/* Mongolian selectors */
		(cp >= 0x200b && cp <= 0x200d) ||	/* zero-width space, (non-)joiner */
		(cp >= 0x2060 && cp <= 0x2065) || (cp >= 0x206a && cp <= 0x206f) ||
		(cp >= 0xfe00 && cp <= 0xfe0f) ||	/* variation selectors */
		cp == 0xfeff || (cp >= 0xfff9 && cp <= 0xfffb) ||
		cp == 0x110bd || cp == 0x110cd || (cp >= 0x13430 && cp <= 0x1343f) ||
		(cp >= 0x1bca0 && cp <= 0x1bca3) || (cp >= 0x1d173 && cp <= 0x1d17a) ||
		cp == 0xe0001 || (cp >= 0xe0020 && cp <= 0xe007f) ||	/* tags */
		(cp >= 0xe0100 && cp <= 0xe01ef);	/* variation selectors */
}

/* A JSON string's escape of a code point: a surrogate pair beyond U+FFFF. */
static void
put_json_escape(FILE *out, unsigned int cp)
{
	if (cp <= 0xffff)
		fprintf(out, "\\u%04x", cp);
	else
		fprintf(out, "\\u%04x\\u%04x", 0xd800 + ((cp - 0x10000) >> 10),
				0xdc00 + ((cp - 0x10000) & 0x3ff));
}

/* Write an escape (fmt takes one number) to out, without a terminating zero. */
static size_t
put_escape(char *out, const char *fmt, unsigned int value)
{
	char		escape[SHOWN_CHAR_MAX + 1];
	int			len = snprintf(escape, sizeof(escape), fmt, value);

	memcpy(out, escape, len);
	return (size_t) len;
}

/* What a character of bot-written text is, for both ways of printing it. */
typedef enum TextCharKind
{
	TC_PLAIN,					/* printed as it is */
	TC_CONTROL,					/* a C0 control or DEL (one byte) */
	TC_INVALID,					/* a byte that does not start valid UTF-8 */
	TC_STEERING					/* steering_code_point() */
} TextCharKind;

/*
 * The kind of the character that starts at p (not at its end), its length
 * in bytes in *len and its code point in *cp.
 */
static TextCharKind
text_char(const char *p, size_t *len, unsigned int *cp)
{
	const unsigned char *u = (const unsigned char *) p;

	*len = 1;
	*cp = u[0];
	if (u[0] < 0x20 || u[0] == 0x7f)
		return TC_CONTROL;
	if (u[0] < 0x80)
		return TC_PLAIN;
	if ((*len = utf8_sequence(u, cp)) == 0)
	{
		*len = 1;
		*cp = u[0];
		return TC_INVALID;
	}
	return steering_code_point(*cp) ? TC_STEERING : TC_PLAIN;
}

/*
 * The character of journal text that starts at p (not at its end), as it is
 * shown on a terminal: written to out (at most SHOWN_CHAR_MAX bytes, no
 * terminating zero), its length in *out_len.  Returns how many bytes of p
 * the character took.
 */
size_t
shown_char(const char *p, char *out, size_t *out_len)
{
	size_t		len;
	unsigned int cp;

	switch (text_char(p, &len, &cp))
	{
		case TC_CONTROL:
		case TC_INVALID:
			*out_len = put_escape(out, "\\x%02x", cp);
			break;
		case TC_STEERING:
			*out_len = put_escape(out, cp <= 0xffff ? "\\u%04x" : "\\U%08x", cp);
			break;
		case TC_PLAIN:
			if (p[0] == '\\')
			{
				out[0] = out[1] = '\\';
				*out_len = 2;
			}
			else
			{
				memcpy(out, p, len);
				*out_len = len;
			}
			break;
	}
	return len;
}

/*
 * Journal text as shown on a terminal (see shown_char), in memory the caller
 * frees; NULL if out of memory.
 */
char *
shown_alloc(const char *text)
{
	/* Each byte grows to at most 4 ("\xNN"); a multibyte escape is shorter. */
	char	   *out = malloc(strlen(text) * 4 + 1);
	char	   *o = out;
	const char *p = text;

	if (out == NULL)
		return NULL;
	while (*p)
	{
		size_t		n;

		p += shown_char(p, o, &n);
		o += n;
	}
	*o = '\0';
	return out;
}

/*
 * Write the character at p (not at its end, not a quote or a backslash) as
 * it goes inside a JSON string: as is, as \uXXXX when it is a control, DEL
 * or a character that steers a terminal, or as U+FFFD when the byte is not
 * UTF-8.  Returns how many bytes of p the character took.
 */
static size_t
put_json_char(FILE *out, const char *p)
{
	size_t		len;
	unsigned int cp;

	switch (text_char(p, &len, &cp))
	{
		case TC_CONTROL:
		case TC_STEERING:
			put_json_escape(out, cp);
			break;
		case TC_INVALID:
			fputs("\\ufffd", out);
			break;
		case TC_PLAIN:
			fwrite(p, 1, len, out);
			break;
	}
	return len;
}

/* Write text as a JSON string, quotes included. */
void
put_json_string(FILE *out, const char *text)
{
	const char *p = text;

	putc('"', out);
	while (*p)
	{
		if (*p == '"' || *p == '\\')
		{
			putc('\\', out);
			putc(*p++, out);
		}
		else
			p += put_json_char(out, p);
	}
	putc('"', out);
}

/*
 * Write JSON text (a payload that json_object_payload accepted, or the
 * server's rendering of a record), the characters of its
 * strings as put_json_string writes them (escapes already in it are kept).
 */
void
put_json_object(FILE *out, const char *payload)
{
	const char *p = payload;
	bool		in_string = false;

	while (*p)
	{
		if (!in_string || *p == '"')
		{
			in_string = in_string != (*p == '"');
			putc(*p++, out);
		}
		else if (*p == '\\')
		{
			/* an escape: the backslash and the character after it */
			putc(*p++, out);
			putc(*p++, out);
		}
		else
			p += put_json_char(out, p);
	}
}

/*
 * A recursive-descent check of RFC 8259's grammar.  Each json_* function
 * takes the position of what it checks and returns the position after it,
 * or NULL if the text there is not what it checks.  Line breaks are not
 * accepted even as whitespace: a payload must stay on its line.
 */
static const char *json_value(const char *p, int depth);

static const char *
json_space(const char *p)
{
	while (*p == ' ' || *p == '\t')
		p++;
	return p;
}

static const char *
json_string(const char *p)
{
	if (*p++ != '"')
		return NULL;
	for (;;)
	{
		unsigned char c = (unsigned char) *p;

		if (c == '"')
			return p + 1;
		if (c < 0x20)			/* a control character, or the end */
			return NULL;
		if (c != '\\')
		{
			p++;
			continue;
		}
		p++;
		if (*p == 'u')
		{
			int			i;

			for (i = 1; i <= 4; i++)
				if (!strchr("0123456789abcdefABCDEF", p[i]) || p[i] == '\0')
					return NULL;
			p += 5;
		}
		else if (*p != '\0' && strchr("\"\\/bfnrt", *p))
			p++;
		else
			return NULL;
	}
}

static const char *
json_digits(const char *p)
{
	if (*p < '0' || *p > '9')
		return NULL;
	while (*p >= '0' && *p <= '9')
		p++;
	return p;
}

static const char *
json_number(const char *p)
{
	if (*p == '-')
		p++;
	if (*p == '0')
		p++;
	else if ((p = json_digits(p)) == NULL)
		return NULL;
	if (*p == '.' && (p = json_digits(p + 1)) == NULL)
		return NULL;
	if (*p == 'e' || *p == 'E')
	{
		p++;
		if (*p == '+' || *p == '-')
			p++;
		p = json_digits(p);
	}
	return p;
}

/* An object's or an array's members, after the opening brace or bracket. */
static const char *
json_members(const char *p, int depth, bool object)
{
	char		close = object ? '}' : ']';

	p = json_space(p);
	if (*p == close)
		return p + 1;
	for (;;)
	{
		if (object)
		{
			if ((p = json_string(p)) == NULL)
				return NULL;
			p = json_space(p);
			if (*p++ != ':')
				return NULL;
		}
		if ((p = json_value(p, depth)) == NULL)
			return NULL;
		p = json_space(p);
		if (*p == close)
			return p + 1;
		if (*p++ != ',')
			return NULL;
		p = json_space(p);
	}
}

static const char *
json_value(const char *p, int depth)
{
	p = json_space(p);
	switch (*p)
	{
		case '{':
		case '[':
			if (depth >= JSON_MAX_DEPTH)
				return NULL;
			return json_members(p + 1, depth + 1, *p == '{');
		case '"':
			return json_string(p);
		case 't':
			return strncmp(p, "true", 4) == 0 ? p + 4 : NULL;
		case 'f':
			return strncmp(p, "false", 5) == 0 ? p + 5 : NULL;
		case 'n':
			return strncmp(p, "null", 4) == 0 ? p + 4 : NULL;
		default:
			return json_number(p);
	}
}

/*
 * Whether a NOTIFY payload is one JSON object on one line, as durable sends
 * them: anyone may NOTIFY on durable's channels, and watch --json passes
 * objects through, so anything else must not reach its output unquoted.
 */
bool
json_object_payload(const char *payload)
{
	const char *end;

	if (payload[0] != '{')
		return false;
	end = json_value(payload, 0);
	return end != NULL && *json_space(end) == '\0';
}
