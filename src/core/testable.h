/*
 * GS_TESTABLE marks a helper that is static in the product and visible in the test build of
 * the library (tests/meson.build compiles it with -DGS_TESTABLE=), as curl's UNITTEST does.
 */
#ifndef GS_TESTABLE_H
#define GS_TESTABLE_H
#ifndef GS_TESTABLE
#define GS_TESTABLE static
#endif
#endif
