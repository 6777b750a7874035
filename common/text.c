/* text.c: see text.h. */
#include "text.h"

#include <stdint.h>
#include <string.h>

/* The length of the UTF-8 sequence at s (at most n bytes), or 0 when it is not one. *cp is
 * its code point. */
static size_t utf8_seq(const unsigned char *s, size_t n, uint32_t *cp)
{
	size_t len;
	uint32_t c, min;

	if (s[0] < 0x80) {
		*cp = s[0];
		return 1;
	}
	if ((s[0] & 0xe0) == 0xc0)
		len = 2, c = s[0] & 0x1f, min = 0x80;
	else if ((s[0] & 0xf0) == 0xe0)
		len = 3, c = s[0] & 0x0f, min = 0x800;
	else if ((s[0] & 0xf8) == 0xf0)
		len = 4, c = s[0] & 0x07, min = 0x10000;
	else
		return 0; /* a continuation byte alone (0x80..0xbf, 0x9b among them) or 0xf8.. */
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		c = (c << 6) | (s[i] & 0x3f);
	}
	if (c < min || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff))
		return 0;
	*cp = c;
	return len;
}

const char *text_check(const char *s, size_t len, size_t min, size_t max)
{
	const unsigned char *p = (const unsigned char *)s;

	if (len < min)
		return len ? "is shorter than allowed" : "is empty";
	if (len > max)
		return "is longer than allowed";
	for (size_t i = 0; i < len;) {
		uint32_t cp;
		size_t n = utf8_seq(p + i, len - i, &cp);

		if (n == 0)
			return "is not valid UTF-8";
		if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f))
			return "holds a control character";
		i += n;
	}
	return NULL;
}

const char *text_check_str(const char *s, size_t min, size_t max)
{
	return text_check(s ? s : "", s ? strlen(s) : 0, min, max);
}
