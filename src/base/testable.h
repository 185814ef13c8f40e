/*
 * GS_TESTABLE marks a helper that is static in the product and visible in the test build of
 * the library (tests/meson.build compiles it with -DGS_TESTABLE=), as curl's UNITTEST does.
 * Code that exists only in the test build goes under #ifdef GS_TEST_BUILD: after this header
 * GS_TESTABLE is always defined (as static in the product), so it cannot tell the builds apart.
 */
#ifndef GS_TESTABLE_H
#define GS_TESTABLE_H
#ifdef GS_TESTABLE
#define GS_TEST_BUILD 1
#else
#define GS_TESTABLE static
#endif
#endif
