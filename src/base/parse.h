/*
 * Numbers and durations from text (command lines, config files, query strings): whole-string
 * parsers that say no rather than take a prefix. Each returns 0 and writes *out, or -1 and
 * leaves *out untouched.
 */
#ifndef GS_BASE_PARSE_H
#define GS_BASE_PARSE_H

/* Whether s is entirely a number strtod reads ("1", "0.5", "-2", "1e3"): what an optional
 * argument may take. 0 for NULL and "". */
int gs_parse_is_number(const char *s);

/* Whether s is one or more decimal digits and nothing else. 0 for NULL and "". */
int gs_parse_is_digits(const char *s);

/* The whole of s as a finite double (strtod: blanks before, a sign, hex and exponents taken);
 * out of range (ERANGE) fails. */
int gs_parse_double(const char *s, double *out);

/* A finite number (gs_parse_double) within min..max: intervals, rates. */
int gs_parse_double_range(const char *s, double min, double max, double *out);

/* A plain decimal, as query strings take numbers: 1 to 20 digits, then optionally '.' and one
 * or more digits; no sign, blanks, exponent or hex (strtod alone would take "0x1", "+0", " 1",
 * "1e3", "inf"). */
int gs_parse_plain_decimal(const char *s, double *out);

/* A duration: plain decimal digits and '.', optionally followed by one unit, s m h or d
 * ("90", "1.5s", "5m", "2h", "7d"), in seconds. No sign, blanks, exponent or hex. */
int gs_parse_duration(const char *s, double *seconds);

#endif
