/*
 * Whole-string number and duration parsers (parse.h) over strtod, with errno and the end
 * pointer checked: one copy instead of one per option parser.
 */
#include "base/parse.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define DAY_S 86400.0

int gs_parse_is_number(const char *s)
{
    char *end;

    if (!s || !*s)
        return 0;
    errno = 0;
    (void)strtod(s, &end);
    return *end == '\0';
}

int gs_parse_is_digits(const char *s)
{
    if (!s || !*s)
        return 0;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s))
            return 0;
    return 1;
}

int gs_parse_double(const char *s, double *out)
{
    char *end;
    double v;

    if (!s)
        return -1;
    errno = 0;
    v = strtod(s, &end);
    if (errno || end == s || *end || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

int gs_parse_double_range(const char *s, double min, double max, double *out)
{
    double v;

    if (gs_parse_double(s, &v) != 0 || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

int gs_parse_plain_decimal(const char *s, double *out)
{
    size_t n;
    char *end;
    double v;

    if (!s)
        return -1;
    n = strspn(s, "0123456789");
    if (n == 0 || n > 20 ||
        (s[n] &&
         (s[n] != '.' || !s[n + 1] || strspn(s + n + 1, "0123456789") != strlen(s + n + 1))))
        return -1;
    errno = 0;
    v = strtod(s, &end);
    if (errno || *end || !isfinite(v))
        return -1;
    *out = v;
    return 0;
}

int gs_parse_duration(const char *s, double *seconds)
{
    char *end;
    double v, unit = 1;

    /* Plain decimals only: strtod alone would take " 5", "+5", "0x10", "1e3", "inf". */
    if (!s || !(*s >= '0' && *s <= '9'))
        return -1;
    errno = 0;
    v = strtod(s, &end);
    if (errno || end != s + strspn(s, "0123456789.") || !isfinite(v))
        return -1;
    switch (*end) {
    case '\0':
        break;
    case 's':
        end++;
        break;
    case 'm':
        unit = 60;
        end++;
        break;
    case 'h':
        unit = 3600;
        end++;
        break;
    case 'd':
        unit = DAY_S;
        end++;
        break;
    default:
        return -1;
    }
    if (*end || !isfinite(v * unit))
        return -1;
    *seconds = v * unit;
    return 0;
}
