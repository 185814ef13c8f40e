/*
 * Unit tests for the run report page and the comparison (src/runview/): the comparison
 * document over hand-made reports (changes, change %, directions, null handling, facts that
 * differ, findings that appear or go away), the page's escaping of the data document, and
 * steps.jsonl reading (bucket means past the cap, a broken line named file:line).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "runview/compare.h"
#include "runview/job.h"
#include "runview/page.h"
#include "runview/rundata.h"

static void load(struct gs_rundata *rd, const char *label, const char *text)
{
    memset(rd, 0, sizeof *rd);
    rd->label = strdup(label);
    rd->origin = strdup(label);
    rd->report_text = strdup(text);
    json_error_t je;
    rd->report = json_loads(text, 0, &je);
    assert_non_null(rd->report);
}

static const json_t *row(const json_t *rows, const char *field)
{
    size_t i;
    const json_t *r;
    json_array_foreach(rows, i, r) if (strcmp(json_string_value(json_object_get(r, "field")),
                                              field) == 0) return r;
    return NULL;
}

static void test_compare_fields(void **state)
{
    (void)state;
    struct gs_rundata rd[3];
    load(&rd[0], "before",
         "{\"schema\":\"1.0\",\"train_runtime\":100,\"train_samples_per_second\":10,"
         "\"data_loading_time_ratio\":0.08,\"gpu_avg_utilization_percent\":61.8,"
         "\"communication_time_ratio\":null,\"energy_joules\":0,"
         "\"phases\":{\"data\":{\"mean_ms\":20,\"p50_ms\":19,\"p95_ms\":30,\"count\":9}},"
         "\"facts\":{\"dataloader_num_workers\":0,\"bf16\":false,\"attn_implementation\":\"sdpa\","
         "\"cpu_count\":16},"
         "\"findings\":[{\"id\":\"data_loading\",\"severity\":\"warning\",\"title\":\"t\"},"
         "{\"id\":\"precision\",\"severity\":\"info\"}]}");
    load(&rd[1], "after",
         "{\"schema\":\"1.0\",\"train_runtime\":70,\"train_samples_per_second\":14.3,"
         "\"data_loading_time_ratio\":0.03,\"gpu_avg_utilization_percent\":86.5,"
         "\"communication_time_ratio\":null,\"energy_joules\":50,"
         "\"phases\":{\"data\":{\"mean_ms\":5,\"p50_ms\":4,\"p95_ms\":8,\"count\":9}},"
         "\"facts\":{\"dataloader_num_workers\":8,\"bf16\":true,"
         "\"attn_implementation\":\"flash_attention_2\",\"cpu_count\":16},"
         "\"findings\":[{\"id\":\"healthy\",\"severity\":\"info\"},"
         "{\"id\":\"precision\",\"severity\":\"info\"}]}");
    load(&rd[2], "third", "{\"schema\":\"1.0\",\"train_runtime\":80}");
    json_t *doc = gs_compare_doc(rd, 2);
    assert_non_null(doc);
    const json_t *fields = json_object_get(doc, "fields");
    /* the eight headline fields always, in order; energy because a run has it */
    assert_string_equal(json_string_value(json_object_get(json_array_get(fields, 0), "field")),
                        "train_runtime");
    assert_string_equal(json_string_value(json_object_get(json_array_get(fields, 7), "field")),
                        "communication_time_ratio");
    const json_t *rt = row(fields, "train_runtime");
    const json_t *c = json_array_get(json_object_get(rt, "changes"), 0);
    assert_true(fabs(json_real_value(json_object_get(c, "change")) + 30) < 1e-9);
    assert_true(fabs(json_real_value(json_object_get(c, "change_percent")) + 30) < 1e-9);
    assert_true(json_is_true(json_object_get(c, "better"))); /* runtime down is better */
    const json_t *dr = row(fields, "data_loading_time_ratio");
    c = json_array_get(json_object_get(dr, "changes"), 0);
    assert_true(fabs(json_real_value(json_object_get(c, "change_percent")) + 62.5) < 1e-9);
    assert_true(json_is_true(json_object_get(c, "better")));
    const json_t *ut = row(fields, "gpu_avg_utilization_percent");
    c = json_array_get(json_object_get(ut, "changes"), 0);
    assert_true(json_is_true(json_object_get(c, "better")));
    /* null in either: no change; 0 as the base: no percent */
    c = json_array_get(json_object_get(row(fields, "communication_time_ratio"), "changes"), 0);
    assert_true(json_is_null(json_object_get(c, "change")));
    c = json_array_get(json_object_get(row(fields, "energy_joules"), "changes"), 0);
    assert_true(fabs(json_real_value(json_object_get(c, "change")) - 50) < 1e-9);
    assert_true(json_is_null(json_object_get(c, "change_percent")));
    assert_true(json_is_false(json_object_get(c, "better")));
    /* fields nobody has are left out */
    assert_null(row(fields, "other_time_ratio"));
    /* phases */
    const json_t *ph = row(json_object_get(doc, "phases"), "data");
    assert_non_null(ph);
    assert_int_equal(json_integer_value(json_array_get(json_object_get(ph, "p50_ms"), 0)), 19);
    /* facts that differ, in order; cpu_count (the same) left out */
    const json_t *facts = json_object_get(doc, "facts");
    assert_int_equal(json_array_size(facts), 3);
    assert_string_equal(json_string_value(json_object_get(json_array_get(facts, 0), "key")),
                        "dataloader_num_workers");
    assert_int_equal(
        json_integer_value(json_array_get(json_object_get(json_array_get(facts, 0), "values"), 1)),
        8);
    /* findings */
    const json_t *fs = json_object_get(doc, "findings");
    assert_int_equal(json_array_size(fs), 3);
    const char *want[][2] = {
        {"data_loading", "went away"}, {"precision", "in every run"}, {"healthy", "appeared"}};
    for (size_t i = 0; i < 3; i++) {
        assert_string_equal(json_string_value(json_object_get(json_array_get(fs, i), "id")),
                            want[i][0]);
        assert_string_equal(json_string_value(json_object_get(json_array_get(fs, i), "change")),
                            want[i][1]);
    }
    json_decref(doc);

    /* three runs: a fact absent in one differs (null), changes against the first */
    doc = gs_compare_doc(rd, 3);
    rt = row(json_object_get(doc, "fields"), "train_runtime");
    assert_int_equal(json_array_size(json_object_get(rt, "changes")), 2);
    c = json_array_get(json_object_get(rt, "changes"), 1);
    assert_true(fabs(json_real_value(json_object_get(c, "change")) + 20) < 1e-9);
    facts = json_object_get(doc, "facts");
    assert_int_equal(json_array_size(facts), 4); /* cpu_count: absent in the third */
    assert_true(
        json_is_null(json_array_get(json_object_get(json_array_get(facts, 3), "values"), 2)));
    json_decref(doc);
    for (int i = 0; i < 3; i++)
        gs_rundata_free(&rd[i]);
}

static void test_page_escapes(void **state)
{
    (void)state;
    struct gs_rundata rd;
    struct gs_err err = {0};
    char *html = NULL;
    size_t len = 0;
    load(&rd, "</script><script>alert(1)</script>",
         "{\"schema\":\"1.0\",\"run\":{\"name\":\"</script><!--x\"}}");
    assert_int_equal(gs_report_page_html(&rd, &html, &len, &err), GS_OK);
    assert_int_equal(strlen(html), len);
    /* exactly the template's script elements close; the data holds no '<' */
    const char *d = strstr(html, "id=\"gs-data\">");
    assert_non_null(d);
    const char *end = strstr(d, "</script>");
    assert_non_null(end);
    for (const char *p = d + 13; p < end; p++)
        assert_true(*p != '<');
    assert_non_null(strstr(d, "\\u003c/script>\\u003c!--x"));
    /* the data document is JSON whose report is the one given */
    char *data = strndup(d + 13, (size_t)(end - d - 13));
    json_error_t je;
    json_t *doc = json_loads(data, 0, &je);
    assert_non_null(doc);
    assert_string_equal(json_string_value(json_object_get(
                            json_object_get(json_object_get(doc, "report"), "run"), "name")),
                        "</script><!--x");
    assert_string_equal(json_string_value(json_object_get(doc, "label")),
                        "</script><script>alert(1)</script>");
    assert_non_null(strstr(html, "Content-Security-Policy"));
    assert_null(strstr(html, "unsafe-inline"));
    json_decref(doc);
    free(data);
    free(html);
    gs_rundata_free(&rd);
}

static char *write_tmp(const char *text)
{
    char *path = strdup("/tmp/gs-test-report.XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

static void test_steps_file(void **state)
{
    (void)state;
    struct gs_rundata rd;
    struct gs_err err = {0};
    load(&rd, "r", "{\"schema\":\"1.0\",\"run\":{\"start_time\":1000,\"end_time\":2000}}");
    rd.t_base = 1000;
    /* 4000 steps of one rank and 10 of another: 1500 rows at most, bucket means */
    size_t cap = 6000 * 160, n = 0;
    char *text = malloc(cap);
    for (int i = 0; i < 4000; i++)
        n += (size_t)snprintf(text + n, cap - n,
                              "{\"type\":\"step\",\"step\":%d,\"t0\":%d.0,\"t1\":%d.5,\"rank\":0,"
                              "\"samples\":8,%s\"ms\":{\"data\":%d,\"total_step\":10}}\n",
                              i + 1, 1000 + i, 1000 + i, i % 2 == 0 ? "\"tokens\":100," : "",
                              i % 4 == 0 ? 4 : 0);
    for (int i = 0; i < 10; i++)
        n += (size_t)snprintf(text + n, cap - n,
                              "{\"type\":\"step\",\"step\":%d,\"t0\":%d.0,\"t1\":%d.5,\"rank\":1,"
                              "\"ms\":{\"data\":1}}\n{\"type\":\"log\",\"step\":%d,\"t\":%d,"
                              "\"values\":{\"loss\":%d.5,\"learning_rate\":0.001}}\n",
                              i + 1, 1000 + i, 1000 + i, 10 - i, 1000 + i, i);
    char *path = write_tmp(text);
    assert_int_equal(gs_rundata_load_files(&rd, path, NULL, &err), GS_OK);
    const json_t *st = rd.steps;
    assert_int_equal(json_integer_value(json_object_get(st, "n")), 4010);
    size_t kept = (size_t)json_integer_value(json_object_get(st, "kept"));
    assert_true(kept <= GS_RUNDATA_MAX_STEPS);
    assert_int_equal(json_array_size(json_object_get(st, "data")), kept);
    /* buckets of 4 (4010 / 1200 rounded up): data 4,0,0,0 -> mean 1; samples summed; ranks
     * kept apart */
    assert_int_equal(json_integer_value(json_object_get(st, "bucket")),
                     (4010 + GS_RUNDATA_MAX_STEPS - 1) / GS_RUNDATA_MAX_STEPS);
    assert_true(fabs(json_number_value(json_array_get(json_object_get(st, "data"), 0)) - 1.0) <
                1e-9);
    assert_true(fabs(json_number_value(json_array_get(json_object_get(st, "samples"), 0)) - 32) <
                1e-9);
    assert_int_equal(json_integer_value(json_array_get(json_object_get(st, "rank"), kept - 1)), 1);
    /* tokens summed over a bucket's steps that carry them (2 of 4: 200); rank 1 sent none */
    assert_true(fabs(json_number_value(json_array_get(json_object_get(st, "tokens"), 0)) - 200) <
                1e-9);
    assert_true(json_is_null(json_array_get(json_object_get(st, "tokens"), kept - 1)));
    assert_true(json_is_null(json_array_get(json_object_get(st, "forward"), 0)));
    /* logs sorted by step */
    const json_t *lg = rd.logs;
    assert_int_equal(json_integer_value(json_object_get(lg, "n")), 10);
    assert_true(json_number_value(json_array_get(json_object_get(lg, "step"), 0)) == 1);
    assert_true(fabs(json_number_value(json_array_get(
                         json_object_get(json_object_get(lg, "values"), "loss"), 0)) -
                     9.5) < 1e-9);
    assert_string_equal(rd.gpus_note, "no samples.db: no device samples");
    unlink(path);
    free(path);
    gs_rundata_free(&rd);

    /* a broken line is named file:line */
    load(&rd, "r", "{\"schema\":\"1.0\"}");
    path = write_tmp("{\"type\":\"step\",\"t0\":1,\"t1\":2}\n\n[1,2]\n");
    assert_int_equal(gs_rundata_load_files(&rd, path, NULL, &err), GS_EPARSE);
    char want[256];
    snprintf(want, sizeof want, "%s:3: not a JSON object", path);
    assert_string_equal(err.msg, want);
    unlink(path);
    free(path);
    path = write_tmp("{\"type\":\"step\",\"t0\":1}\n");
    assert_int_equal(gs_rundata_load_files(&rd, path, NULL, &err), GS_EPARSE);
    assert_non_null(strstr(err.msg, ":1: step record without t0/t1"));
    unlink(path);
    free(path);
    gs_rundata_free(&rd);
    free(text);
}

/* The job document (report/job.c): nodes from run.node / run.hostname / the label, ranks in
 * rank order with their GPU, the median over ranks (even count: mean of the middle two), the
 * straggler by the leave-one-out rule with its GPU's reasons, mixed job ids noted, a report without
 * ranks or GPUs. */
static void test_job_doc(void **state)
{
    struct gs_rundata rd[3];
    (void)state;

    load(&rd[0], "a",
         "{\"run\": {\"job\": \"j1\", \"node\": \"n1\"}, \"steps\": 10,"
         "\"per_rank\": [{\"rank\": 1, \"device\": 1, \"steps\": 10, \"step_p50_ms\": 100,"
         "\"mean_ms\": {\"data\": 5, \"communication\": 30}},"
         "{\"rank\": 0, \"device\": 0, \"steps\": 10, \"step_p50_ms\": 110,"
         "\"mean_ms\": {\"data\": 5, \"communication\": 30, \"communication_exposed\": 3}}],"
         "\"gpus\": [{\"index\": 0, \"name\": \"G0\"}, {\"index\": 1, \"name\": \"G1\","
         "\"throttled_seconds\": {\"sw_power_cap\": 0}, \"throttled_seconds_total\": 0}]}");
    load(&rd[1], "b",
         "{\"run\": {\"job\": \"j1\", \"hostname\": \"h2\"}, \"steps\": 10,"
         "\"per_rank\": [{\"rank\": 2, \"device\": 0, \"steps\": 10, \"step_p50_ms\": 300,"
         "\"mean_ms\": {\"data\": 200}}],"
         "\"gpus\": [{\"index\": 3, \"name\": \"only\"}]}");
    json_t *doc = gs_job_doc(rd, 2);
    assert_non_null(doc);
    assert_string_equal(json_string_value(json_object_get(doc, "job")), "j1");
    /* ranks' p50s 100, 110, 300: median 110 */
    assert_true(json_real_value(json_object_get(doc, "median_step_p50_ms")) == 110.0);
    json_t *ranks = json_object_get(doc, "ranks");
    assert_int_equal(json_array_size(ranks), 3);
    for (int i = 0; i < 3; i++)
        assert_int_equal(json_integer_value(json_object_get(json_array_get(ranks, i), "rank")), i);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(ranks, 1), "gpu")), 1);
    /* the only GPU of node h2 is rank 2's, whatever its index */
    assert_int_equal(json_integer_value(json_object_get(json_array_get(ranks, 2), "gpu")), 3);
    assert_string_equal(json_string_value(json_object_get(json_array_get(ranks, 2), "node")), "h2");
    /* exposed communication when measured */
    assert_true(json_real_value(json_object_get(json_array_get(ranks, 0), "communication_ms")) ==
                3.0);
    json_t *st = json_object_get(doc, "straggler");
    assert_true(json_is_object(st));
    assert_int_equal(json_integer_value(json_object_get(st, "rank")), 2);
    /* leave-one-out: rank 2's busy 300 ms against the others' median (70 + 107) / 2 */
    assert_true(fabs(json_real_value(json_object_get(st, "others_busy_ms")) - 88.5) < 1e-9);
    assert_true(fabs(json_real_value(json_object_get(st, "ratio_to_others")) - 300 / 88.5) < 1e-9);
    /* rank 1 (busy 70) against the median of 107 and 300 */
    assert_true(fabs(json_real_value(json_object_get(json_array_get(ranks, 1), "ratio_to_others")) -
                     70 / 203.5) < 1e-9);
    /* a node without samples/s: the job's sum is unknown */
    assert_true(json_is_null(json_object_get(doc, "samples_per_second")));
    assert_string_equal(json_string_value(json_object_get(st, "cause")), "data_loading");
    assert_string_equal(json_string_value(json_object_get(json_object_get(st, "gpu"), "name")),
                        "only");
    /* node n1: GPU 1's reason at 0 s is not listed */
    json_t *n1 = json_array_get(json_object_get(doc, "nodes"), 0);
    assert_string_equal(json_string_value(json_object_get(n1, "node")), "n1");
    assert_int_equal(json_object_size(json_object_get(
                         json_array_get(json_object_get(n1, "gpus"), 1), "throttle_reasons")),
                     0);
    json_decref(doc);
    gs_rundata_free(&rd[1]);

    /* two ranks, one computing 1.12x the other (busy_p50_ms as a report gives it): no
     * straggler; two job ids: job null, both seen; a run without ranks; the ranks' own samples/s
     * summed (not the reports' job-wide figures, 99 each) */
    gs_rundata_free(&rd[0]);
    load(&rd[0], "a2",
         "{\"run\": {\"job\": \"j1\"}, \"train_samples_per_second\": 99, \"per_rank\": "
         "[{\"rank\": 0, \"step_p50_ms\": 130, \"busy_p50_ms\": 100, \"comm_wait_p50_ms\": 30, "
         "\"samples_per_second\": 10.5}]}");
    load(&rd[1], "c",
         "{\"run\": {\"job\": \"j2\"}, \"train_samples_per_second\": 99, \"per_rank\": "
         "[{\"rank\": 1, \"step_p50_ms\": 130, \"busy_p50_ms\": 112, \"comm_wait_p50_ms\": 18, "
         "\"samples_per_second\": 20}]}");
    load(&rd[2], "empty", "{}");
    doc = gs_job_doc(rd, 2);
    assert_non_null(doc);
    assert_true(json_is_null(json_object_get(doc, "straggler")));
    assert_true(json_real_value(json_object_get(doc, "samples_per_second")) == 30.5);
    assert_true(json_real_value(json_object_get(json_array_get(json_object_get(doc, "ranks"), 1),
                                                "busy_ms")) == 112.0);
    json_decref(doc);
    /* 1.2x with two ranks: rank 1 is the straggler (a median over both would read 1.09x) */
    gs_rundata_free(&rd[1]);
    load(&rd[1], "c",
         "{\"run\": {\"job\": \"j2\"}, \"per_rank\": [{\"rank\": 1, \"step_p50_ms\": 130, "
         "\"busy_p50_ms\": 120, \"comm_wait_p50_ms\": 10}]}");
    doc = gs_job_doc(rd, 3);
    assert_non_null(doc);
    st = json_object_get(doc, "straggler");
    assert_int_equal(json_integer_value(json_object_get(st, "rank")), 1);
    assert_true(fabs(json_real_value(json_object_get(st, "ratio_to_others")) - 1.2) < 1e-9);
    assert_true(json_real_value(json_object_get(st, "others_communication_ms")) == 30.0);
    assert_true(json_is_null(json_object_get(doc, "job")));
    assert_int_equal(json_array_size(json_object_get(doc, "jobs_seen")), 2);
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(doc, "nodes"), 2), "node")),
                        "empty");
    json_decref(doc);
    for (int i = 0; i < 3; i++)
        gs_rundata_free(&rd[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compare_fields),
        cmocka_unit_test(test_page_escapes),
        cmocka_unit_test(test_steps_file),
        cmocka_unit_test(test_job_doc),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
