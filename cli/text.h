/*-------------------------------------------------------------------------
 *
 * text.h
 *		How durablectl prints text that bots wrote: escaped for a terminal,
 *		or as JSON.
 *
 * IDENTIFICATION
 *	  cli/text.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef DURABLECTL_TEXT_H
#define DURABLECTL_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* The longest form shown_char() writes, without a terminating zero. */
#define SHOWN_CHAR_MAX	10

extern size_t shown_char(const char *p, char *out, size_t *out_len);
extern char *shown_alloc(const char *text);
extern void put_json_string(FILE *out, const char *text);
extern bool json_object_payload(const char *payload);
extern void put_json_object(FILE *out, const char *payload);

#endif							/* DURABLECTL_TEXT_H */
