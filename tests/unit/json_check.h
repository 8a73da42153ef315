/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * A strict check of one JSON value (RFC 8259), ASCII only: the fabric's control replies must
 * parse with any JSON reader, whatever the command held. Shared by the fabric's unit test
 * and its control-socket fuzzer (which defines JSON_CHECKER to keep these branches out of
 * its coverage).
 */
#ifndef QHCA_JSON_CHECK_H
#define QHCA_JSON_CHECK_H

#include <stdbool.h>
#include <string.h>

#ifndef JSON_CHECKER
#define JSON_CHECKER
#endif

JSON_CHECKER static const char *js_value(const char *s, int depth);

JSON_CHECKER static const char *js_ws(const char *s)
{
	while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
		s++;
	return s;
}

JSON_CHECKER static const char *js_string(const char *s)
{
	int i;

	if (*s++ != '"')
		return NULL;
	for (;;) {
		unsigned char c = (unsigned char)*s++;

		if (c == '"')
			return s;
		if (c < 0x20 || c >= 0x80)
			return NULL;
		if (c != '\\')
			continue;
		c = (unsigned char)*s++;
		if (c == 'u') {
			for (i = 0; i < 4; i++, s++)
				if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f') ||
				      (*s >= 'A' && *s <= 'F')))
					return NULL;
		} else if (!c || !strchr("\"\\/bfnrt", c)) {
			return NULL;
		}
	}
}

JSON_CHECKER static const char *js_digits(const char *s)
{
	if (*s < '0' || *s > '9')
		return NULL;
	while (*s >= '0' && *s <= '9')
		s++;
	return s;
}

JSON_CHECKER static const char *js_number(const char *s)
{
	if (*s == '-')
		s++;
	if (*s == '0')
		s++;
	else if (!(s = js_digits(s)))
		return NULL;
	if (*s == '.' && !(s = js_digits(s + 1)))
		return NULL;
	if (*s == 'e' || *s == 'E') {
		s++;
		if (*s == '+' || *s == '-')
			s++;
		s = js_digits(s);
	}
	return s;
}

JSON_CHECKER static const char *js_members(const char *s, int depth, char close, bool keys)
{
	s = js_ws(s);
	if (*s == close)
		return s + 1;
	for (;;) {
		if (keys) {
			s = js_string(js_ws(s));
			if (!s)
				return NULL;
			s = js_ws(s);
			if (*s++ != ':')
				return NULL;
		}
		s = js_value(s, depth + 1);
		if (!s)
			return NULL;
		s = js_ws(s);
		if (*s == close)
			return s + 1;
		if (*s++ != ',')
			return NULL;
	}
}

JSON_CHECKER static const char *js_value(const char *s, int depth)
{
	s = js_ws(s);
	if (depth > 32)
		return NULL;
	switch (*s) {
	case '{':
		return js_members(s + 1, depth, '}', true);
	case '[':
		return js_members(s + 1, depth, ']', false);
	case '"':
		return js_string(s);
	case 't':
		return strncmp(s, "true", 4) ? NULL : s + 4;
	case 'f':
		return strncmp(s, "false", 5) ? NULL : s + 5;
	case 'n':
		return strncmp(s, "null", 4) ? NULL : s + 4;
	default:
		return js_number(s);
	}
}

JSON_CHECKER static inline bool json_valid(const char *s)
{
	s = s ? js_value(s, 0) : NULL;
	return s && !*js_ws(s);
}

#endif
