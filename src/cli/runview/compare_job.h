/*
 * compare_job.h - the text of `gpuscope compare --job` (compare_job.c): the job document of
 * src/runview/job.h as tables of nodes and ranks and the straggler's evidence.
 */
#ifndef GS_CLI_COMPARE_JOB_H
#define GS_CLI_COMPARE_JOB_H

#include <jansson.h>

struct gs_tbuf;

void gs_cli_job_text(struct gs_tbuf *b, const json_t *doc);

#endif
