/*
 * test_tune_plan.c - `gpuscope tune`'s pure logic (src/cli/tune/plan.c): --try parsing, the
 * candidates a report's findings point at, window figures from step records (warmup, ranks,
 * samples), the early cut, the gain rule, the loss check, GPUSCOPE_TUNE and the change spelled
 * per framework.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cli/tune/plan.h"

static json_t *parse(const char *text)
{
    json_t *j = json_loads(text, 0, NULL);
    assert_non_null(j);
    return j;
}

static void try_specs(void **state)
{
    struct tune_cand c[8];
    unsigned n = 0;
    char why[256], label[128];
    (void)state;

    assert_int_equal(tune_parse_try("num_workers=2,4", c, &n, 8, why, sizeof why), 0);
    assert_int_equal(n, 2);
    assert_int_equal(c[1].s[0].route, TUNE_LOADER);
    assert_string_equal(c[1].s[0].val, "4");
    assert_false(c[0].needs_workers);
    assert_int_equal(tune_parse_try("prefetch_factor=4", c, &n, 8, why, sizeof why), 0);
    assert_true(c[2].needs_workers);
    assert_int_equal(
        tune_parse_try("args.per_device_train_batch_size=8", c, &n, 8, why, sizeof why), 0);
    assert_int_equal(c[3].s[0].route, TUNE_TRAINARG);
    assert_int_equal(tune_parse_try("env.NCCL_ALGO=Ring", c, &n, 8, why, sizeof why), 0);
    assert_int_equal(c[4].s[0].route, TUNE_ENV);
    assert_int_equal(tune_parse_try("--use_flash_attn=true", c, &n, 8, why, sizeof why), 0);
    assert_int_equal(c[5].s[0].route, TUNE_FLAG);
    assert_string_equal(tune_cand_label(&c[5], label, sizeof label), "--use_flash_attn=true");
    /* refused: unknown keys, no values, quotes, too many */
    assert_int_equal(tune_parse_try("batch=4", c, &n, 8, why, sizeof why), -1);
    assert_non_null(strstr(why, "not a setting"));
    assert_int_equal(tune_parse_try("num_workers=", c, &n, 8, why, sizeof why), -1);
    assert_int_equal(tune_parse_try("num_workers", c, &n, 8, why, sizeof why), -1);
    assert_int_equal(tune_parse_try("env.X=a'b", c, &n, 8, why, sizeof why), -1);
    assert_int_equal(tune_parse_try("num_workers=1,2,3", c, &n, 8, why, sizeof why), -1);
    assert_non_null(strstr(why, "more than 8"));
}

static void candidates(void **state)
{
    json_t *r = parse("{\"data_loading_time_ratio\":0.9,\"run\":{\"framework\":\"torch\","
                      "\"command\":\"python train.py\"},\"facts\":{\"cpu_count\":16,"
                      "\"loader_num_workers\":2},\"findings\":[{\"id\":\"data_loading\"},"
                      "{\"id\":\"communication\"}],\"gpus\":[{}]}");
    struct tune_cand c[16], base = {0};
    unsigned n = 0;
    (void)state;

    tune_candidates_round1(r, 2, c, &n, 16);
    /* half of 16 cores = 8, then 2 (the current: left out), 4; 8 once; no bucket for torch */
    assert_int_equal(n, 2);
    assert_string_equal(c[0].s[0].val, "8");
    assert_string_equal(c[1].s[0].val, "4");
    /* 2 cores in the report: 1 and 2 */
    json_object_set_new(json_object_get(r, "facts"), "cpu_count", json_integer(2));
    json_object_set_new(json_object_get(r, "facts"), "loader_num_workers", json_integer(0));
    n = 0;
    tune_candidates_round1(r, 64, c, &n, 16);
    assert_int_equal(n, 2);
    assert_string_equal(c[0].s[0].val, "1");
    assert_string_equal(c[1].s[0].val, "2");
    /* HF: the communication finding tries ddp_bucket_cap_mb */
    json_object_set_new(json_object_get(r, "run"), "framework", json_string("hf"));
    n = 0;
    tune_candidates_round1(r, 64, c, &n, 16);
    assert_int_equal(n, 4);
    assert_int_equal(c[2].s[0].route, TUNE_TRAINARG);
    assert_string_equal(c[2].s[0].key, "ddp_bucket_cap_mb");
    /* round 2 on top of num_workers=2: prefetch, persistent, pin_memory (a GPU) */
    base.n = 1;
    base.s[0].route = TUNE_LOADER;
    strcpy(base.s[0].key, "num_workers");
    strcpy(base.s[0].val, "2");
    n = 0;
    tune_candidates_round2(r, &base, 1, c, &n, 16);
    assert_int_equal(n, 3);
    assert_int_equal(c[0].n, 2);
    assert_string_equal(c[0].s[1].key, "prefetch_factor");
    assert_string_equal(c[2].s[1].key, "pin_memory");
    n = 0;
    tune_candidates_round2(r, NULL, 0, c, &n, 16); /* no workers: nothing */
    assert_int_equal(n, 0);
    /* a healthy report: nothing to try */
    json_decref(r);
    r = parse("{\"data_loading_time_ratio\":0.01,\"findings\":[{\"id\":\"healthy\"}]}");
    n = 0;
    tune_candidates_round1(r, 8, c, &n, 16);
    assert_int_equal(n, 0);
    json_decref(r);
}

/* Steps of one rank every 0.1 s (warmup slower), a second rank every 0.2 s. */
static void window(void **state)
{
    json_t *steps = json_array();
    struct tune_window w;
    (void)state;

    for (int s = 1; s <= 12; s++) {
        double t1 = s <= 2 ? s * 1.0 : 2.0 + (s - 2) * 0.1;
        json_array_append_new(steps,
                              json_pack("{s:i,s:i,s:f,s:i,s:i,s:{s:f}}", "rank", 0, "step", s, "t1",
                                        t1, "samples", 8, "tokens", 100, "ms", "data", 50.0));
    }
    assert_int_equal(tune_window_stats(steps, 2, 10, &w), 0);
    assert_int_equal(w.steps, 10);
    assert_true(fabs(w.steps_per_s - 10.0) < 1e-6);
    assert_true(fabs(w.samples_per_s - 80.0) < 1e-6);
    assert_true(fabs(w.tokens_per_s - 1000.0) < 1e-6);
    {
        json_t *rep = json_pack("{s:f,s:f}", "mfu", 0.4, "train_tokens_per_second", 500.0);
        assert_true(fabs(tune_window_mfu(rep, w.tokens_per_s) - 0.8) < 1e-9);
        assert_true(isnan(tune_window_mfu(rep, NAN)));
        json_object_set_new(rep, "mfu", json_null());
        assert_true(isnan(tune_window_mfu(rep, 1000)));
        json_decref(rep);
    }
    assert_true(fabs(w.data_ratio - 0.5) < 1e-6);
    assert_true(isnan(w.comm_ratio));
    assert_true(fabs(w.step_p50_ms - 100.0) < 1e-6);
    assert_true(fabs(w.t_from - 2.0) < 1e-9 && fabs(w.t_to - 3.0) < 1e-9);
    /* a window shorter than asked: what there is */
    assert_int_equal(tune_window_stats(steps, 2, 100, &w), 0);
    assert_int_equal(w.steps, 10);
    /* no step after the warmup: no window */
    assert_int_equal(tune_window_stats(steps, 12, 10, &w), -1);
    /* a slower second rank sets the job's steps/s; samples/s add up */
    for (int s = 1; s <= 12; s++)
        json_array_append_new(steps, json_pack("{s:i,s:i,s:f,s:i,s:{s:f}}", "rank", 1, "step", s,
                                               "t1", 2.0 + (s - 2) * 0.2, "samples", 8, "ms",
                                               "communication", 20.0));
    assert_int_equal(tune_window_stats(steps, 2, 10, &w), 0);
    assert_int_equal(w.ranks, 2);
    assert_true(fabs(w.steps_per_s - 5.0) < 1e-6);
    assert_true(fabs(w.samples_per_s - 120.0) < 1e-6);
    assert_true(isnan(w.tokens_per_s)); /* rank 1's steps carry no count */
    assert_true(w.comm_ratio > 0);
    json_decref(steps);
}

static void rules(void **state)
{
    json_t *b = parse("[{\"type\":\"log\",\"step\":1,\"rank\":0,\"values\":{\"loss\":2.0}},"
                      "{\"type\":\"log\",\"step\":2.0,\"rank\":0,\"values\":{\"loss\":1.0}},"
                      "{\"type\":\"log\",\"step\":2,\"rank\":1,\"values\":{\"loss\":9.0}},"
                      "{\"type\":\"step\",\"step\":2}]");
    json_t *t = parse("[{\"type\":\"log\",\"step\":2,\"rank\":0,\"values\":{\"loss\":1.5}}]");
    json_t *lb = tune_losses(b, 10), *lt = tune_losses(t, 10), *none = json_array();
    double d;
    (void)state;

    assert_int_equal(json_array_size(lb), 2);
    assert_int_equal(tune_loss_diverges(lb, lt, 0.1, &d), 1);
    assert_true(fabs(d - 0.5) < 1e-9);
    assert_int_equal(tune_loss_diverges(lb, lt, 0.6, &d), 0);
    assert_int_equal(tune_loss_diverges(lb, none, 0.1, &d), -1);
    assert_true(tune_cut_early(5, 5, 10, 3, 0.3));
    assert_false(tune_cut_early(5, 2, 10, 3, 0.3)); /* too few steps yet */
    assert_false(tune_cut_early(8, 5, 10, 3, 0.3)); /* not clearly worse */
    assert_true(tune_worth(10, 10.6, 0.05));
    assert_false(tune_worth(10, 10.4, 0.05));
    assert_false(tune_worth(NAN, 10.4, 0.05));
    json_decref(b);
    json_decref(t);
    json_decref(lb);
    json_decref(lt);
    json_decref(none);
}

static void spelling(void **state)
{
    struct tune_cand c = {0};
    char buf[512];
    const char *w[8];
    json_t *e;
    char *text;
    (void)state;

    c.n = 3;
    c.s[0] = (struct tune_setting){TUNE_LOADER, "num_workers", "4"};
    c.s[1] = (struct tune_setting){TUNE_LOADER, "persistent_workers", "true"};
    c.s[2] = (struct tune_setting){TUNE_ENV, "NCCL_ALGO", "Ring"};
    assert_string_equal(tune_spell(&c, TUNE_FW_TORCH, buf, sizeof buf),
                        "DataLoader(..., num_workers=4, persistent_workers=True)\n"
                        "export NCCL_ALGO=Ring");
    assert_string_equal(tune_spell(&c, TUNE_FW_HF, buf, sizeof buf),
                        "TrainingArguments(..., dataloader_num_workers=4, "
                        "dataloader_persistent_workers=True)\nexport NCCL_ALGO=Ring");
    assert_string_equal(tune_spell(&c, TUNE_FW_SWIFT, buf, sizeof buf),
                        "swift ... --dataloader_num_workers 4 --dataloader_persistent_workers "
                        "true\nexport NCCL_ALGO=Ring");
    assert_int_equal(tune_flags(&c, TUNE_FW_SWIFT, w, 8), 4);
    assert_string_equal(w[0], "--dataloader_num_workers");
    assert_int_equal(tune_flags(&c, TUNE_FW_TORCH, w, 8), 0);
    /* GPUSCOPE_TUNE: typed values, HF gets the TrainingArguments fields too, swift none */
    e = tune_env_json(&c, TUNE_FW_HF, "train");
    text = json_dumps(e, JSON_COMPACT | JSON_SORT_KEYS);
    assert_string_equal(text, "{\"dataloader\":{\"num_workers\":4,\"persistent_workers\":true},"
                              "\"dataloader_scope\":\"train\",\"training_args\":{"
                              "\"dataloader_num_workers\":4,\"dataloader_persistent_workers\":"
                              "true}}");
    free(text);
    json_decref(e);
    assert_null(tune_env_json(&c, TUNE_FW_SWIFT, "all"));
    e = tune_value_json("0.5");
    assert_true(json_is_real(e));
    json_decref(e);
    e = tune_value_json("Ring");
    assert_true(json_is_string(e));
    json_decref(e);
}

/* The fastest trial, unless a subset of its settings is as fast (within min_gain). */
static void recommend(void **state)
{
    struct tune_cand c[5];
    const struct tune_cand *p[5];
    double sps[5] = {10, 20, 20.5, 14, 30};
    int ok[5] = {1, 1, 1, 1, 0};
    (void)state;

    memset(c, 0, sizeof c);
    c[1].n = 1;
    c[1].s[0] = (struct tune_setting){TUNE_LOADER, "num_workers", "2"};
    c[2] = c[1];
    c[2].n = 2;
    c[2].s[1] = (struct tune_setting){TUNE_LOADER, "prefetch_factor", "4"};
    c[3].n = 1;
    c[3].s[0] = (struct tune_setting){TUNE_LOADER, "num_workers", "1"};
    c[4] = c[2];
    for (int i = 0; i < 5; i++)
        p[i] = &c[i];
    assert_true(tune_subset(&c[1], &c[2]));
    assert_false(tune_subset(&c[2], &c[1]));
    assert_false(tune_subset(&c[3], &c[2]));
    /* 20.5 with prefetch is within 5 % of 20 without: the simpler num_workers=2; trial 4
     * (30, not usable: its loss diverged) is never picked */
    assert_int_equal(tune_recommend(p, sps, ok, 5, 0.05), 1);
    sps[2] = 25; /* prefetch now adds 25 %: kept */
    assert_int_equal(tune_recommend(p, sps, ok, 5, 0.05), 2);
    sps[1] = sps[2] = 10.2; /* nothing worth it */
    sps[3] = 10.3;
    assert_int_equal(tune_recommend(p, sps, ok, 5, 0.05), -1);
    assert_int_equal(tune_recommend(p, sps, ok, 1, 0.05), -1);
}

/* The combination takes a setting only from a trial that beat its own base. */
static void combination(void **state)
{
    struct tune_cand c[5], out;
    const struct tune_cand *p[5];
    double sps[5] = {10, 20, 20.3, 26, 15};
    int ok[5] = {1, 1, 1, 1, 1};
    (void)state;

    memset(c, 0, sizeof c);
    c[1].n = 1;
    c[1].s[0] = (struct tune_setting){TUNE_LOADER, "num_workers", "2"};
    c[2] = c[1]; /* + prefetch: 20.3 against its base's 20, nothing */
    c[2].n = 2;
    c[2].s[1] = (struct tune_setting){TUNE_LOADER, "prefetch_factor", "4"};
    c[3] = c[1]; /* + persistent: 26 against 20, worth it */
    c[3].n = 2;
    c[3].s[1] = (struct tune_setting){TUNE_LOADER, "persistent_workers", "true"};
    c[4].n = 1; /* an env setting alone, 15 against the baseline's 10: worth it */
    c[4].s[0] = (struct tune_setting){TUNE_ENV, "OMP_NUM_THREADS", "2"};
    for (int i = 0; i < 5; i++)
        p[i] = &c[i];
    assert_int_equal(tune_combination(p, sps, ok, 5, 0.05, &out), 1);
    assert_int_equal(out.n, 3); /* the fastest (3) + the env setting; not the prefetch */
    assert_string_equal(out.s[1].key, "persistent_workers");
    assert_string_equal(out.s[2].key, "OMP_NUM_THREADS");
    ok[4] = 0; /* only the fastest's own settings: nothing to combine */
    assert_int_equal(tune_combination(p, sps, ok, 5, 0.05, &out), 0);
}

static void framework(void **state)
{
    json_t *r = parse("{\"run\":{\"framework\":\"hf\",\"command\":\"/opt/bin/swift sft --x 1\"}}");
    (void)state;

    assert_int_equal(tune_framework_of(r), TUNE_FW_SWIFT);
    json_object_set_new(json_object_get(r, "run"), "command", json_string("python t.py"));
    assert_int_equal(tune_framework_of(r), TUNE_FW_HF);
    json_object_set_new(json_object_get(r, "run"), "framework", json_string("torch"));
    assert_int_equal(tune_framework_of(r), TUNE_FW_TORCH);
    json_decref(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(try_specs), cmocka_unit_test(candidates),  cmocka_unit_test(window),
        cmocka_unit_test(rules),     cmocka_unit_test(spelling),    cmocka_unit_test(framework),
        cmocka_unit_test(recommend), cmocka_unit_test(combination),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
