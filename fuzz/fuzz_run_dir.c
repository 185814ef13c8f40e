/*
 * libFuzzer target for a run directory's steps.jsonl as `gpuscope report` reads it
 * (src/runview/rundata.c): any bytes as the file, with a fixed report; every line must be
 * accepted or refused with a message naming the file and line, never a crash or a UBSan
 * report, and what is accepted must make a data document (src/runview/page.c) that is valid
 * JSON with no '<' in it (the page embeds it in a script element). The same bytes are then
 * the steps.jsonl of a directory without metrics_report.json (an interrupted run): its report
 * is rebuilt from the records (src/run/agg.h), or refused with a message, and must make a
 * data document as well.
 *
 * Input: steps.jsonl's bytes; seeds are in fuzz/corpus/run_dir/. Build and run: make fuzz.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <jansson.h>

#include "fuzz_util.h"
#include "runview/page.h"
#include "runview/rundata.h"

static char dir[64]; /* the interrupted directory: a private one, made once per process */

static void remove_dir(void)
{
    char steps[96];

    snprintf(steps, sizeof steps, "%s/steps.jsonl", dir);
    unlink(steps);
    rmdir(dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char report[] =
        "{\"schema\":\"1.0\",\"run\":{\"name\":\"f<\",\"start_time\":1000,\"end_time\":2000}}";
    struct gs_rundata rd;
    struct gs_err err = {0};
    char path[64], *doc = NULL;
    size_t len = 0;
    int fd = memfd_create("steps.jsonl", 0);

    if (fd < 0)
        return 0;
    if (size && write(fd, data, size) != (ssize_t)size) {
        close(fd);
        return 0;
    }
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    memset(&rd, 0, sizeof rd);
    rd.report_text = strdup(report);
    rd.report = json_loads(report, 0, NULL);
    rd.t_base = 1000;
    CHECK(rd.report_text && rd.report);
    if (gs_rundata_load_files(&rd, path, NULL, &err) == GS_OK) {
        CHECK(gs_report_page_data(&rd, &doc, &len, &err) == GS_OK);
        CHECK(memchr(doc, '<', len) == NULL);
        json_t *back = json_loadb(doc, len, 0, NULL);
        CHECK(back);
        json_decref(back);
        free(doc);
    } else {
        CHECK(strncmp(err.msg, path, strlen(path)) == 0);
    }
    gs_rundata_free(&rd);
    close(fd);

    char steps[96];
    FILE *f;

    if (!dir[0]) {
        snprintf(dir, sizeof dir, "/tmp/fuzz-run-dir-XXXXXX");
        CHECK(mkdtemp(dir));
        atexit(remove_dir);
    }
    snprintf(steps, sizeof steps, "%s/steps.jsonl", dir);
    f = fopen(steps, "we");
    CHECK(f);
    CHECK(fwrite(data, 1, size, f) == size || size == 0);
    CHECK(fclose(f) == 0);
    if (gs_rundata_load(dir, 0, &rd, &err) == GS_OK) {
        json_t *run = json_object_get(rd.report, "run");
        CHECK(json_is_true(json_object_get(run, "interrupted")));
        CHECK(gs_report_page_data(&rd, &doc, &len, &err) == GS_OK);
        CHECK(memchr(doc, '<', len) == NULL);
        free(doc);
    } else {
        CHECK(err.msg[0]);
    }
    gs_rundata_free(&rd);
    unlink(steps);
    return 0;
}
