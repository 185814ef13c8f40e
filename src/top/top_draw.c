/*
 * `gpuscope top`'s drawing (top.h): one full frame per call into ncurses' virtual screen,
 * which sends the terminal only what changed. Layout, top to bottom: the header (host, data
 * source, time), the GPU blocks (three lines each: meters, meters, badges and the history
 * graph; one more line per MIG instance), a scroll line whenever not every GPU fits, the lower
 * panel (processes or training runs), the message line and the keys.
 *
 * Nothing is hidden silently: GPUs that do not fit are counted on the scroll line, processes
 * past the table's end on its header, and a source that failed says so in place of its GPUs.
 */
#include <curses.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <wchar.h>

#include "gpuscope/gs_run.h"
#include "top/top.h"

enum { C_GREEN = 1, C_YELLOW, C_RED, C_CYAN, C_MAGENTA, C_BLUE, C_HEAD };

static attr_t col(struct top_ui *ui, int pair)
{
    return ui->color ? COLOR_PAIR(pair) : 0;
}

/* Writes text at (y, x) clipped to the screen's width; returns the column after it. Printable
 * ASCII, the common case, goes in as one row of cells (waddchnstr: no conversion of each byte
 * through the locale's multibyte decoder, about a tenth of waddnstr's cost); other text through
 * waddnstr. */
static int put(int y, int x, attr_t a, const char *fmt, ...)
{
    char buf[1024];
    chtype cells[sizeof buf];
    va_list ap;
    int n, k = 0, ascii = 1;

    if (y < 0 || y >= LINES || x >= COLS)
        return x;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    n = COLS - x;
    for (const unsigned char *p = (const unsigned char *)buf; *p && k < n; p++) {
        if (*p < 0x20 || *p > 0x7e) {
            ascii = 0;
            break;
        }
        cells[k++] = (chtype)*p | a;
    }
    if (ascii) {
        mvaddchnstr(y, x, cells, k);
        return x + k;
    }
    attron(a);
    mvaddnstr(y, x, buf, n);
    attroff(a);
    /* columns, not bytes: count UTF-8 lead bytes */
    {
        int w = 0;
        for (const unsigned char *p = (const unsigned char *)buf; *p; p++)
            if ((*p & 0xC0) != 0x80)
                w++;
        return x + (w < n ? w : n);
    }
}

/* Header bars: the colour pair, or reverse video without colour. */
static attr_t head(struct top_ui *ui)
{
    return ui->color ? COLOR_PAIR(C_HEAD) : A_REVERSE;
}

static int level_pair(double r)
{
    return r >= 0.9 ? C_RED : r >= 0.6 ? C_YELLOW : C_GREEN;
}

/* A meter: LABEL[|||||    text] in w columns; r < 0 draws an empty one with text "N/A". */
static int meter(struct top_ui *ui, int y, int x, int w, const char *label, double r,
                 const char *text, int pair)
{
    int inner, fill, tl;

    x = put(y, x, A_BOLD | col(ui, C_CYAN), "%s", label);
    inner = w - (int)strlen(label) - 2;
    if (inner < 4)
        return x;
    x = put(y, x, A_BOLD, "[");
    fill = r >= 0 ? (int)lround((r > 1 ? 1 : r) * inner) : 0;
    tl = (int)strlen(text);
    {
        chtype cells[512];
        int k = 0, x0 = x;
        for (int i = 0; i < inner; i++) {
            int in_text = i >= inner - tl;
            char ch = in_text ? text[i - (inner - tl)] : (i < fill ? '|' : ' ');
            attr_t a = i < fill ? col(ui, pair ? pair : level_pair(r)) : 0;
            if (in_text)
                a = i < fill && !ui->color ? A_BOLD : A_BOLD | (r < 0 ? col(ui, 0) : 0);
            if (x < COLS && k < (int)(sizeof cells / sizeof cells[0]))
                cells[k++] = (chtype)(unsigned char)ch | a;
            x++;
        }
        if (y < LINES && k) /* the row in one call, not a call a cell */
            mvaddchnstr(y, x0, cells, k);
    }
    return put(y, x, A_BOLD, "]");
}

/* ≈100 % busy at near-idle power: a kernel spinning (an NCCL hang, a busy-wait). */
static int spinning(const struct gs_gpu *g)
{
    return !g->lost && gs_gpu_has(g, GS_M_UTIL_GPU) && gs_gpu_has(g, GS_M_POWER_DRAW) &&
           gs_spinning(g->v[GS_M_UTIL_GPU], g->v[GS_M_POWER_DRAW], gs_gpu_power_limit(g));
}

/* The badges of g, each drawn from x on line y; returns the column after them. */
static int badges(struct top_ui *ui, int y, int x, const struct gs_gpu *g)
{
    static const uint64_t named = GS_THR_SW_POWER_CAP | GS_THR_HW_SLOWDOWN | GS_THR_SYNC_BOOST |
                                  GS_THR_SW_THERMAL | GS_THR_HW_THERMAL | GS_THR_HW_POWER_BRAKE;

    if (g->lost)
        return put(y, x, A_BOLD | A_REVERSE | col(ui, C_RED), "LOST") + 1;
    if (spinning(g))
        x = put(y, x, A_BOLD | A_REVERSE | col(ui, C_MAGENTA), "SPINNING") + 1;
    if (gs_gpu_has(g, GS_M_THROTTLE_ACTIVE)) {
        uint64_t m = gs_gpu_mask(g, GS_M_THROTTLE_ACTIVE) & named;
        for (uint64_t bit = 1; bit && bit <= m; bit <<= 1)
            if (m & bit) {
                const char *n = gs_throttle_name(bit);
                x = put(y, x, A_BOLD | A_REVERSE | col(ui, C_YELLOW), "%s", n ? n : "throttle") + 1;
            }
    }
    if (gs_gpu_has(g, GS_M_ECC_UNCORR_VOL) && g->v[GS_M_ECC_UNCORR_VOL] > 0)
        x = put(y, x, A_BOLD | A_REVERSE | col(ui, C_RED), "ECC %.0f", g->v[GS_M_ECC_UNCORR_VOL]) +
            1;
    if (gs_gpu_has(g, GS_M_REMAP_PENDING) && g->v[GS_M_REMAP_PENDING] > 0)
        x = put(y, x, A_BOLD | A_REVERSE | col(ui, C_RED), "ROW REMAP") + 1;
    if (gs_gpu_has(g, GS_M_XID_LAST) && g->v[GS_M_XID_LAST] > 0)
        x = put(y, x, A_BOLD | A_REVERSE | col(ui, C_RED), "XID %.0f", g->v[GS_M_XID_LAST]) + 1;
    return x;
}

static const char *const graph_label[TOP_G__N] = {"util", "mem ", "pwr "};

static void graph(struct top_ui *ui, int y, int x, int w, const struct top_hist *h,
                  enum top_graph k, const struct gs_gpu *g)
{
    static const char ascii[] = "_.-=+*#@";
    double top = 1.0;
    unsigned start;

    x = put(y, x, col(ui, C_CYAN), "%s ", graph_label[k]);
    w -= 5;
    if (w < 4 || y >= LINES)
        return;
    if (k == TOP_G_POWER) {
        top = gs_gpu_power_limit(g);
        if (top <= 0)
            for (unsigned i = 0; i < h->n; i++)
                if (!isnan(top_hist_at(h, i)) && top_hist_at(h, i) > top)
                    top = top_hist_at(h, i);
        if (top <= 0)
            top = 1;
    }
    start = h->n > (unsigned)w ? h->n - (unsigned)w : 0;
    /* right-aligned: the newest point at the right edge; the row of cells in one call */
    x += w - (int)(h->n - start);
    if (ui->utf8) {
        static const wchar_t wblk[8][2] = {{0x2581, 0}, {0x2582, 0}, {0x2583, 0}, {0x2584, 0},
                                           {0x2585, 0}, {0x2586, 0}, {0x2587, 0}, {0x2588, 0}};
        cchar_t cell[3][8], blank, row[TOP_HIST];
        int n = 0, x0 = x;
        setcchar(&blank, L" ", A_NORMAL, 0, NULL);
        for (int p = 0; p < 3; p++)
            for (int l = 0; l < 8; l++)
                setcchar(&cell[p][l], wblk[l], A_NORMAL, (short)(ui->color ? C_GREEN + p : 0),
                         NULL);
        for (unsigned i = start; i < h->n && x < COLS; i++, x++) {
            float v = top_hist_at(h, i);
            int lvl;
            if (isnan(v)) {
                row[n++] = blank;
                continue;
            }
            lvl = (int)lround(v / top * 7);
            lvl = lvl < 0 ? 0 : lvl > 7 ? 7 : lvl;
            row[n++] = cell[level_pair(v / top) - C_GREEN][lvl];
        }
        if (n)
            mvadd_wchnstr(y, x0, row, n);
        return;
    }
    {
        chtype row[TOP_HIST];
        int n = 0, x0 = x;
        for (unsigned i = start; i < h->n && x < COLS; i++, x++) {
            float v = top_hist_at(h, i);
            int lvl;
            if (isnan(v)) {
                row[n++] = ' ';
                continue;
            }
            lvl = (int)lround(v / top * 7);
            lvl = lvl < 0 ? 0 : lvl > 7 ? 7 : lvl;
            row[n++] = (chtype)ascii[lvl] | col(ui, level_pair(v / top));
        }
        if (n)
            mvaddchnstr(y, x0, row, n);
    }
}

static void fmt_rate(char *out, size_t len, const struct gs_gpu *g, enum gs_metric m)
{
    char b[16];

    if (!gs_gpu_has(g, m)) {
        snprintf(out, len, "N/A");
        return;
    }
    top_fmt_bytes(b, sizeof b, g->v[m]);
    snprintf(out, len, "%s/s", b);
}

/* Line 2's NVLink part, after PCIe, on a GPU with links: " NVL 18/18 tx 11GB/s rx 11GB/s",
 * the link count red when one is down. Left out whole when the line has no room for it. */
static void nvlink_meter(struct top_ui *ui, int y, int x, const struct gs_gpu *g)
{
    char a[32], b[32], tail[80];
    int n;

    if (g->n_nvlink == 0 || !gs_gpu_has(g, GS_M_NVLINK_LINKS) ||
        !gs_gpu_has(g, GS_M_NVLINK_LINKS_ACTIVE))
        return;
    fmt_rate(a, sizeof a, g, GS_M_NVLINK_TX);
    fmt_rate(b, sizeof b, g, GS_M_NVLINK_RX);
    n = snprintf(tail, sizeof tail, " tx %s rx %s", a, b);
    if (x + 4 + 6 + n > COLS)
        return;
    x = put(y, x, A_BOLD | col(ui, C_CYAN), " NVL ");
    x = put(y, x,
            g->v[GS_M_NVLINK_LINKS_ACTIVE] < g->v[GS_M_NVLINK_LINKS] ? A_BOLD | col(ui, C_RED) : 0,
            "%.0f/%.0f", g->v[GS_M_NVLINK_LINKS_ACTIVE], g->v[GS_M_NVLINK_LINKS]);
    put(y, x, 0, "%s", tail);
}

/* One GPU's block; returns the lines used. */
static int gpu_block(struct top_ui *ui, int y, int maxy, const struct top_srcframe *s, unsigned gi)
{
    const struct gs_gpu *g = &s->snap->gpus[gi];
    const struct top_hist *h = &s->hist[gi * TOP_G__N];
    int W = COLS, x, half, used = 0;
    char t[64], a[32], b[32];

    if (y >= maxy)
        return 0;
    /* line 1: index, name, utilization and memory meters */
    x = put(y, 0, A_BOLD | (g->lost ? col(ui, C_RED) : 0), "%2u ", g->index);
    x = put(y, x, g->lost ? col(ui, C_RED) : 0, "%-21.21s",
            gs_gpu_has_text(g, GS_T_NAME)
                ? g->text[GS_T_NAME] + (strncmp(g->text[GS_T_NAME], "NVIDIA ", 7) ? 0 : 7)
                : "?");
    half = (W - x - 1) / 2;
    if (g->lost) {
        put(y, x + 1, A_BOLD | col(ui, C_RED), "fell off the bus; its readings are gone");
    } else {
        double r = gs_gpu_has(g, GS_M_UTIL_GPU) ? g->v[GS_M_UTIL_GPU] : -1;
        snprintf(t, sizeof t, r >= 0 ? "%.0f%%" : "N/A", r * 100);
        meter(ui, y, x + 1, half - 1, "UTL", r, t, 0);
        if (gs_gpu_has(g, GS_M_MEM_USED) && gs_gpu_has(g, GS_M_MEM_TOTAL) &&
            g->v[GS_M_MEM_TOTAL] > 0) {
            top_fmt_bytes(a, sizeof a, g->v[GS_M_MEM_USED]);
            top_fmt_bytes(b, sizeof b, g->v[GS_M_MEM_TOTAL]);
            snprintf(t, sizeof t, "%s/%s", a, b);
            r = g->v[GS_M_MEM_USED] / g->v[GS_M_MEM_TOTAL];
        } else {
            snprintf(t, sizeof t, "N/A");
            r = -1;
        }
        meter(ui, y, x + half + 1, W - x - half - 1, "MEM", r, t, 0);
    }
    used++;
    if (y + used >= maxy)
        return used;
    /* line 2: power meter, temperature, clocks, PCIe */
    if (!g->lost) {
        double lim = gs_gpu_power_limit(g), r = -1;
        if (gs_gpu_has(g, GS_M_POWER_DRAW)) {
            if (lim > 0) {
                snprintf(t, sizeof t, "%.0f/%.0fW", g->v[GS_M_POWER_DRAW], lim);
                r = g->v[GS_M_POWER_DRAW] / lim;
            } else {
                snprintf(t, sizeof t, "%.0fW", g->v[GS_M_POWER_DRAW]);
            }
        } else {
            snprintf(t, sizeof t, "N/A");
        }
        x = meter(ui, y + used, 3, 24, "PWR", r, t, 0) + 1;
        if (gs_gpu_has(g, GS_M_TEMP_GPU)) {
            double slow = gs_gpu_has(g, GS_M_TEMP_SLOWDOWN) ? g->v[GS_M_TEMP_SLOWDOWN] : 90;
            x = put(y + used, x, A_BOLD | col(ui, C_CYAN), "TMP ");
            x = put(y + used, x, col(ui, level_pair(g->v[GS_M_TEMP_GPU] / slow)), "%.0fC ",
                    g->v[GS_M_TEMP_GPU]);
        } else {
            x = put(y + used, x, A_BOLD | col(ui, C_CYAN), "TMP ");
            x = put(y + used, x, 0, "N/A ");
        }
        x = put(y + used, x, A_BOLD | col(ui, C_CYAN), "CLK ");
        if (gs_gpu_has(g, GS_M_CLOCK_SM))
            x = put(y + used, x, 0, "%.0f", g->v[GS_M_CLOCK_SM] / 1e6);
        else
            x = put(y + used, x, 0, "N/A");
        if (gs_gpu_has(g, GS_M_CLOCK_MEM))
            x = put(y + used, x, 0, "/%.0fMHz ", g->v[GS_M_CLOCK_MEM] / 1e6);
        else
            x = put(y + used, x, 0, "MHz ");
        fmt_rate(a, sizeof a, g, GS_M_PCIE_TX);
        fmt_rate(b, sizeof b, g, GS_M_PCIE_RX);
        x = put(y + used, x, A_BOLD | col(ui, C_CYAN), "PCIe");
        if (gs_gpu_has(g, GS_M_PCIE_GEN) && gs_gpu_has(g, GS_M_PCIE_WIDTH))
            x = put(y + used, x, 0, "%.0fx%.0f", g->v[GS_M_PCIE_GEN], g->v[GS_M_PCIE_WIDTH]);
        x = put(y + used, x, 0, " tx %s rx %s", a, b);
        nvlink_meter(ui, y + used, x, g);
    } else {
        put(y + used, 3, col(ui, C_RED), "last Xid %s; processes on it are gone or hung",
            gs_gpu_has(g, GS_M_XID_LAST) ? (snprintf(t, sizeof t, "%.0f", g->v[GS_M_XID_LAST]), t)
                                         : "unknown");
    }
    used++;
    if (y + used >= maxy)
        return used;
    /* line 3: badges, then the graph */
    x = badges(ui, y + used, 3, g);
    graph(ui, y + used, x, W - x, &h[ui->prefs.graph], ui->prefs.graph, g);
    used++;
    /* MIG instances */
    for (unsigned m = 0; m < g->n_mig && y + used < maxy; m++) {
        const struct gs_mig *mg = &g->mig[m];
        double r = -1;
        const char *prof = strstr(mg->name, "MIG ");
        x = put(y + used, 3, col(ui, C_BLUE), "%s MIG %-12.12s GI %-2u CI %-2u ",
                ui->utf8 ? "\u2514" : "`", prof ? prof + 4 : mg->name, mg->gi_id, mg->ci_id);
        if (mg->mem_st == GS_ST_OK && mg->mem_total_bytes) {
            top_fmt_bytes(a, sizeof a, (double)mg->mem_used_bytes);
            top_fmt_bytes(b, sizeof b, (double)mg->mem_total_bytes);
            snprintf(t, sizeof t, "%s/%s", a, b);
            r = (double)mg->mem_used_bytes / (double)mg->mem_total_bytes;
        } else {
            snprintf(t, sizeof t, "N/A");
        }
        x = meter(ui, y + used, x, W - x > 40 ? 40 : W - x, "MEM", r, t, 0);
        /* the instance's graphics engine activity (GPM MIG samples), when read and room */
        if (mg->gpm_st[GS_MIG_GPM_GR_ACTIVE] == GS_ST_OK && W - x >= 16) {
            snprintf(t, sizeof t, "%.0f%%", mg->gpm[GS_MIG_GPM_GR_ACTIVE] * 100);
            meter(ui, y + used, x + 1, W - x - 1 > 24 ? 24 : W - x - 1, "GR",
                  mg->gpm[GS_MIG_GPM_GR_ACTIVE], t, 0);
        }
        used++;
    }
    return used;
}

static int block_height(const struct gs_gpu *g)
{
    return 3 + (int)g->n_mig;
}

/* ---- the process table ---- */

static const char *const col_title[TOP_C__N] = {"GPU", "PID",  "USER", "JOB",  "GMEM",
                                                "SM%", "CPU%", "HMEM", "TIME", "COMMAND"};

static void proc_table(struct top_ui *ui, int y0, int h)
{
    const struct top_frame *f = ui->f;
    int gw = f->n_src > 1 ? 14 : 4;
    static const int w[TOP_C__N] = {0, 7, 8, 12, 6, 4, 5, 6, 8, 0};
    int x = 1, rows = h - 1;

    if (h < 2)
        return;
    /* header, the sort column marked */
    attron(head(ui));
    mvhline(y0, 0, ' ', COLS);
    attroff(head(ui));
    for (int c = 0; c < TOP_C__N; c++) {
        int cw = c == TOP_C_GPU ? gw : w[c];
        char t[32];
        int is = (int)ui->prefs.sort == c;
        snprintf(t, sizeof t, "%s%s", col_title[c],
                 is ? (ui->prefs.reverse ? (c >= TOP_C_GMEM && c <= TOP_C_TIME ? "^" : "v")
                                         : (c >= TOP_C_GMEM && c <= TOP_C_TIME ? "v" : "^"))
                    : "");
        if (c == TOP_C_CMD || c == TOP_C_USER || c == TOP_C_JOB || c == TOP_C_GPU)
            put(y0, x, A_REVERSE | A_BOLD | col(ui, C_HEAD) | (is ? A_UNDERLINE : 0), "%-*s", cw,
                t);
        else
            put(y0, x, A_REVERSE | A_BOLD | col(ui, C_HEAD) | (is ? A_UNDERLINE : 0), "%*s", cw, t);
        x += cw + 1;
    }
    if (ui->sel >= ui->n_rows)
        ui->sel = ui->n_rows ? ui->n_rows - 1 : 0;
    if (ui->sel < ui->proc_top)
        ui->proc_top = ui->sel;
    if (ui->sel >= ui->proc_top + (size_t)rows)
        ui->proc_top = ui->sel - (size_t)rows + 1;
    if (ui->proc_top + (size_t)rows > ui->n_rows)
        ui->proc_top = ui->n_rows > (size_t)rows ? ui->n_rows - (size_t)rows : 0;
    /* processes past the table's end are counted on its last line, never hidden silently */
    if (ui->n_rows > (size_t)rows && rows >= 2) {
        size_t last;
        rows--;
        if (ui->sel >= ui->proc_top + (size_t)rows)
            ui->proc_top = ui->sel - (size_t)rows + 1;
        if (ui->proc_top + (size_t)rows > ui->n_rows)
            ui->proc_top = ui->n_rows - (size_t)rows;
        last = ui->proc_top + (size_t)rows;
        put(y0 + 1 + rows, 1, A_BOLD | col(ui, C_YELLOW),
            "processes %zu-%zu of %zu%s%s%s  PgUp/PgDn", ui->proc_top + 1, last, ui->n_rows,
            ui->filter[0] ? " matching '" : "", ui->filter, ui->filter[0] ? "'" : "");
    } else if (ui->filter[0] && rows >= 2 && ui->n_rows < (size_t)rows) {
        put(y0 + ui->n_rows + 1 + (ui->n_rows ? 0 : 1), 1, A_DIM, "%zu process%s matching '%s'",
            ui->n_rows, ui->n_rows == 1 ? "" : "es", ui->filter);
    }
    ui->proc_y0 = y0 + 1;
    ui->proc_rows = rows;
    if (!ui->n_rows) {
        put(y0 + 1, 1, A_DIM,
            ui->filter[0] ? "no process matches the filter (/ to change it)"
                          : "no processes on the GPUs");
        return;
    }
    for (int i = 0; i < rows && ui->proc_top + (size_t)i < ui->n_rows; i++) {
        const struct top_row *r = &ui->rows[ui->proc_top + (size_t)i];
        const struct top_srcframe *s = &f->src[r->src];
        const struct gs_proc *p = &s->snap->procs[r->proc];
        int y = y0 + 1 + i, sel = ui->proc_top + (size_t)i == ui->sel;
        attr_t base = sel ? A_REVERSE : 0;
        char gm[16], hm[16], tm[16], sm[8], cpu[8];
        double now = f->t;
        if (sel) {
            attron(A_REVERSE);
            mvhline(y, 0, ' ', COLS);
            attroff(A_REVERSE);
        }
        if (top_is_tagged(ui, r->src, r->pid))
            put(y, 0, base | A_BOLD | col(ui, C_YELLOW), "*");
        if (p->mem_st == GS_ST_OK)
            top_fmt_bytes(gm, sizeof gm, (double)p->gpu_mem_bytes);
        else
            snprintf(gm, sizeof gm, "N/A");
        if (p->host_st == GS_ST_OK)
            top_fmt_bytes(hm, sizeof hm, (double)p->rss_bytes);
        else
            snprintf(hm, sizeof hm, "N/A");
        if (p->start_time > 0)
            top_fmt_duration(tm, sizeof tm, now - p->start_time);
        else
            snprintf(tm, sizeof tm, "N/A");
        if (p->util_st == GS_ST_OK)
            snprintf(sm, sizeof sm, "%.0f", p->sm_util * 100);
        else
            snprintf(sm, sizeof sm, "N/A");
        if (p->cpu_st == GS_ST_OK)
            snprintf(cpu, sizeof cpu, "%.0f", p->cpu_ratio * 100);
        else
            snprintf(cpu, sizeof cpu, "N/A");
        if (p->pid == 0) /* what the agent's visibility policy withheld */
            x = put(y, 1, base, "%-*.*s %7s ", gw, gw, r->gpu, "-");
        else
            x = put(y, 1, base, "%-*.*s %7u ", gw, gw, r->gpu, p->pid);
        x = put(y, x, base | (sel ? 0 : col(ui, C_GREEN)), "%-8.8s ",
                p->user[0] ? p->user
                : p->pid   ? "?"
                           : "");
        x = put(y, x, base | (sel ? 0 : col(ui, C_BLUE)), "%-12.12s ", r->job);
        x = put(y, x, base, "%6s %4s %5s %6s %8s ", gm, sm, cpu, hm, tm);
        x = put(y, x, base | col(ui, C_CYAN), "%s", r->prefix);
        put(y, x, base | (p->pid == 0 ? A_DIM : 0), "%s",
            p->cmdline[0] ? p->cmdline
            : p->name[0]  ? p->name
                          : "?");
    }
}

/* ---- the training panel ---- */

static const char *jstr(const json_t *o, const char *k, const char *dflt)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : dflt;
}

static int jnum(const json_t *o, const char *k, double *v)
{
    const json_t *j = json_object_get(o, k);

    if (!json_is_number(j))
        return 0;
    *v = json_number_value(j);
    return 1;
}

static void fmt_ratio(char *out, size_t len, const json_t *o, const char *k)
{
    double v;

    if (jnum(o, k, &v))
        snprintf(out, len, "%.0f%%", v * 100);
    else
        snprintf(out, len, "-");
}

static void runs_panel(struct top_ui *ui, int y0, int h)
{
    const struct top_frame *f = ui->f;
    int y = y0, maxy = y0 + h, any_agent = 0;
    unsigned idx = 0;
    const json_t *sel_rep = NULL;
    const json_t *sel_run = NULL;

    attron(head(ui));
    mvhline(y, 0, ' ', COLS);
    put(y, 1, A_REVERSE | A_BOLD | col(ui, C_HEAD),
        "TRAINING RUNS  %-4s %-9s %-11s %-11s %6s %6s %4s %4s  FINDINGS", "ID", "USER", "STATE",
        "NAME", "STEPS", "RUN", "DATA", "COMM");
    attroff(head(ui));
    y++;
    for (unsigned si = 0; si < f->n_src; si++) {
        const struct top_srcframe *s = &f->src[si];
        const json_t *r;
        size_t i;
        if (s->kind == TOP_SRC_NVML)
            continue;
        any_agent = 1;
        if (!s->runs) {
            put(y++, 1, A_DIM, "%s: no runs (the agent's steps socket is off or unreachable)",
                s->name);
            continue;
        }
        json_array_foreach(json_object_get(s->runs, "runs"), i, r)
        {
            char key[32], rt[16], dr[8], cr[8], fnd[128] = "";
            double v;
            const json_t *fa = json_object_get(r, "findings"), *fi;
            size_t j;
            int is_sel = idx == ui->run_sel, stalled, interrupted;
            if (y >= maxy - 1) {
                put(y++, 1, A_BOLD | col(ui, C_YELLOW),
                    "+%zu more runs (a taller terminal shows them)",
                    json_array_size(json_object_get(s->runs, "runs")) - i);
                break;
            }
            snprintf(key, sizeof key, "%lld",
                     (long long)json_integer_value(json_object_get(r, "id")));
            if (is_sel) {
                sel_rep = s->reports ? json_object_get(s->reports, key) : NULL;
                sel_run = r;
            }
            if (jnum(r, "train_runtime", &v))
                top_fmt_duration(rt, sizeof rt, v);
            else
                snprintf(rt, sizeof rt, "-");
            fmt_ratio(dr, sizeof dr, r, "data_loading_time_ratio");
            fmt_ratio(cr, sizeof cr, r, "communication_time_ratio");
            /* the agent's hang rule says the run stopped stepping (/api/v1/runs "stalled") */
            stalled = json_is_true(json_object_get(r, "stalled"));
            if (stalled && jnum(r, "stalled_seconds", &v)) {
                char d[16];
                top_fmt_duration(d, sizeof d, v);
                snprintf(fnd, sizeof fnd, "no step for %s", d);
            }
            /* its sender went away without an end (or the agent restarted): while "end" is null
             * the agent waits runs_resume_timeout for it (docs/agent.md RESUMING A RUN) */
            interrupted = !stalled && !strcmp(jstr(r, "state", ""), "interrupted");
            if (interrupted && json_is_null(json_object_get(r, "end")))
                snprintf(fnd, sizeof fnd, "waiting for its sender to resume");
            json_array_foreach(fa, j, fi)
            {
                size_t l = strlen(fnd);
                snprintf(fnd + l, sizeof fnd - l, "%s%s",
                         l ? ((stalled || interrupted) && j == 0 ? "; " : ",") : "",
                         json_string_value(fi) ? json_string_value(fi) : "?");
            }
            put(y, 0,
                (is_sel ? A_REVERSE : 0) | (stalled       ? A_BOLD | col(ui, C_RED)
                                            : interrupted ? A_BOLD | col(ui, C_YELLOW)
                                                          : 0),
                "%s%-14.14s %-4s %-9.9s %-11.11s %-11.11s %6lld %6s %4s %4s  %s",
                is_sel ? ">" : " ", f->n_src > 1 ? s->name : "", key, jstr(r, "user", "?"),
                stalled ? "stalled" : jstr(r, "state", "?"), jstr(r, "name", ""),
                (long long)json_integer_value(json_object_get(r, "steps")), rt, dr, cr, fnd);
            y++;
            idx++;
        }
    }
    if (!any_agent) {
        put(y++, 1, 0,
            "Training runs come from the agent (/api/v1/runs); this view reads NVML directly.");
        put(y++, 1, A_DIM,
            "Start `gpuscope agent` and send steps to it (docs/agent.md, RUNS), or use --host.");
        return;
    }
    if (idx == 0) {
        put(y++, 1, A_DIM,
            "no training runs yet: `gpuscope run -- CMD`, or the Python package with the agent's "
            "socket");
        return;
    }
    if (ui->run_sel >= idx)
        ui->run_sel = idx - 1;
    if (!sel_rep || y >= maxy) {
        if (sel_run && y < maxy)
            put(y, 1, A_DIM,
                "(the report of run %lld is read while it runs, and for the newest run)",
                (long long)json_integer_value(json_object_get(sel_run, "id")));
        return;
    }
    /* the selected run's report */
    {
        const json_t *ph = json_object_get(sel_rep, "phases");
        const json_t *st = json_object_get(ph, "total_step");
        double p50, p95, v, sum = 0;
#define PHASE_NAME_(e, name, wall) name,
        static const char *const phase_names[GS_PH_ALL] = {GS_PHASES(PHASE_NAME_)};
#undef PHASE_NAME_
        /* the bar's phases (gs_run.h GS_PHASES) and their letters */
        static const int phase[] = {GS_PH_DATA,      GS_PH_FORWARD, GS_PH_BACKWARD,
                                    GS_PH_OPTIMIZER, GS_PH_COMM,    GS_PH_OTHER};
        static const char letters[] = "DFBOCX";
        double ms[6];
        int x, bw;
        char dr[8], cr[8];
        y++;
        if (y >= maxy)
            return;
        fmt_ratio(dr, sizeof dr, sel_rep, "data_loading_time_ratio");
        fmt_ratio(cr, sizeof cr, sel_rep, "communication_time_ratio");
        x = put(y, 1, A_BOLD, "step ");
        if (jnum(st, "p50_ms", &p50) && jnum(st, "p95_ms", &p95))
            x = put(y, x, 0, "p50 %.1f ms  p95 %.1f ms", p50, p95);
        else
            x = put(y, x, A_DIM, "p50 -  p95 -");
        x = put(y, x, 0, "   data %s  comm %s", dr, cr);
        if (jnum(sel_rep, "gpu_busy_estimate_percent", &v))
            x = put(y, x, 0, "  GPU busy %.0f%%", v);
        if (jnum(sel_rep, "train_samples_per_second", &v))
            put(y, x, 0, "  %.1f samples/s", v);
        y++;
        if (y >= maxy)
            return;
        /* the phase split as one bar of letters, then the legend */
        for (int i = 0; i < 6; i++) {
            ms[i] = 0;
            jnum(json_object_get(ph, phase_names[phase[i]]), "mean_ms", &ms[i]);
            if (ms[i] < 0 || isnan(ms[i]))
                ms[i] = 0;
            if (phase[i] != GS_PH_COMM) /* may overlap backward: not in the sum */
                sum += ms[i];
        }
        x = put(y, 1, A_BOLD, "phases ");
        bw = COLS - x - 2 > 40 ? 40 : COLS - x - 2;
        if (sum > 0 && bw > 6) {
            static const int pairs[] = {C_YELLOW, C_GREEN, C_CYAN, C_BLUE, C_MAGENTA, C_RED};
            int drawn = 0;
            for (int i = 0; i < 6; i++) {
                int n;
                if (phase[i] == GS_PH_COMM)
                    continue;
                n = (int)lround(ms[i] / sum * bw);
                for (int k = 0; k < n && drawn < bw; k++, drawn++)
                    put(y, x + drawn, A_REVERSE | col(ui, pairs[i]), "%c", letters[i]);
            }
            x += drawn + 1;
            for (int i = 0; i < 6 && x < COLS - 12; i++)
                if (ms[i] > 0)
                    x = put(y, x, 0, " %c %s %.0fms", letters[i], phase_names[phase[i]], ms[i]);
        } else {
            put(y, x, A_DIM, "no phase times yet");
        }
        y++;
        /* per-rank spread */
        {
            const json_t *pr = json_object_get(sel_rep, "per_rank"), *rk;
            const json_t *slow = json_object_get(sel_rep, "slowest_rank");
            size_t i;
            if (json_array_size(pr) > 0 && y < maxy) {
                x = put(y, 1, A_BOLD, "ranks ");
                json_array_foreach(pr, i, rk)
                {
                    double a = NAN, b = NAN;
                    jnum(rk, "step_p50_ms", &a);
                    jnum(rk, "step_p95_ms", &b);
                    if (x > COLS - 24) {
                        x = put(y, x, A_DIM, "+%zu", json_array_size(pr) - i);
                        break;
                    }
                    x = put(y, x, 0, "r%lld %.0f/%.0fms  ",
                            (long long)json_integer_value(json_object_get(rk, "rank")), a, b);
                }
                /* red when it is a straggler (docs/report.md, STRAGGLER) */
                if (json_is_object(slow) && jnum(slow, "slower_by_ratio", &v))
                    put(y, x, col(ui, json_is_true(json_object_get(slow, "straggler")) ? C_RED : 0),
                        "slowest r%lld +%.0f%%",
                        (long long)json_integer_value(json_object_get(slow, "rank")), v * 100);
                y++;
            }
        }
        /* findings */
        {
            const json_t *fa = json_object_get(sel_rep, "findings"), *fi;
            size_t i;
            json_array_foreach(fa, i, fi)
            {
                const char *sev = jstr(fi, "severity", "info");
                int pair = !strcmp(sev, "critical")  ? C_RED
                           : !strcmp(sev, "warning") ? C_YELLOW
                                                     : C_GREEN;
                if (y >= maxy)
                    break;
                x = put(y, 1, A_BOLD | col(ui, pair), "%-8s ", sev);
                put(y, x, 0, "%s", jstr(fi, "title", jstr(fi, "id", "?")));
                y++;
            }
        }
    }
}

/* ---- help and detail ---- */

static const char *const help_lines[] = {
    "gpuscope top: keys (docs/top.md)",
    " Up Down PgUp PgDn  move in the process table (the runs in the training panel)",
    " Home End           first / last process",
    " [ ]                scroll the GPUs when they do not all fit",
    " < >  i             sort by the previous / next column; invert the order",
    " /                  filter: pid, user, job, GPU or command text; Esc clears",
    " t                  tree view (children under their parents)",
    " space  ui           tag / untag a process; untag all",
    " k  F9              signal the tagged (or the selected) processes:",
    "                    1 TERM, 2 KILL, 3 INT, then y to confirm",
    " Enter              details: command line, CUDA_VISIBLE_DEVICES, cgroup;",
    "                    there s reads the Python stack",
    " g                  graph: utilization / memory / power",
    " r                  lower panel: processes / training runs",
    " + -                refresh interval",
    " m                  mouse on/off (click selects, wheel scrolls)",
    " Ctrl-L             redraw",
    " h  F1  ?           this help;  q  F10  quit (saves top.conf)",
    "Badges: LOST (fell off the bus); SPINNING (>= 95% busy at <= 25% of the power",
    "limit); throttle reasons (power cap, HW slowdown, SW/HW thermal, power brake,",
    "sync boost); ECC n (uncorrected, volatile); ROW REMAP (pending); XID n (last).",
    "Press any key to go back.",
};

static void help_screen(void)
{
    size_t n = sizeof help_lines / sizeof help_lines[0];

    for (size_t i = 0; i < n; i++)
        put((int)i, 0, i == 0 || i == n - 1 ? A_BOLD : 0, "%s", help_lines[i]);
    if ((size_t)LINES < n) /* a short terminal: say so rather than cut silently */
        put(LINES - 1, 0, A_BOLD | A_REVERSE,
            " %zu more lines: enlarge the terminal (docs/top.md KEYS) ", n - (size_t)LINES + 1);
}

static void detail_screen(struct top_ui *ui)
{
    const char *p = ui->detail ? ui->detail : "(no process selected)";
    unsigned line = 0;
    int y = 1;

    attron(head(ui));
    mvhline(0, 0, ' ', COLS);
    put(0, 1, A_REVERSE | A_BOLD | col(ui, C_HEAD),
        "process %u  (Esc back, s Python stack, Up/Down scroll)", ui->detail_pid);
    attroff(head(ui));
    while (*p) {
        const char *e = strchr(p, '\n');
        if (y >= LINES - 1) { /* what does not fit is announced, not cut silently */
            put(LINES - 1, 0, A_BOLD | A_REVERSE, " more below: Down / PgDn ");
            return;
        }
        size_t n = e ? (size_t)(e - p) : strlen(p);
        if (line >= ui->detail_top) {
            /* wrap long lines (a command line) */
            size_t off = 0;
            do {
                size_t w = n - off > (size_t)COLS ? (size_t)COLS : n - off;
                mvaddnstr(y++, 0, p + off, (int)w);
                off += w;
            } while (off < n && y < LINES - 1);
        }
        line++;
        p += n + (e ? 1 : 0);
    }
}

/* ---- the frame ---- */

static void header(struct top_ui *ui)
{
    const struct top_frame *f = ui->f;
    char tb[32];
    time_t t = (time_t)f->t;
    struct tm tm;
    int x;

    localtime_r(&t, &tm);
    strftime(tb, sizeof tb, "%H:%M:%S", &tm);
    attron(head(ui));
    mvhline(0, 0, ' ', COLS);
    attroff(head(ui));
    x = put(0, 0, A_REVERSE | A_BOLD | col(ui, C_HEAD), " gpuscope top ");
    /* simulated GPUs (nvml-sim, here or behind an agent) say so first, as every other view;
     * one word, so that the source still fits 80 columns */
    for (unsigned i = 0; i < f->n_src; i++)
        if (f->src[i].snap && f->src[i].snap->sys.simulated) {
            x = put(0, x + 1, A_BOLD | col(ui, C_RED), "SIMULATED") + 1;
            break;
        }
    if (f->n_src == 1) {
        const struct top_srcframe *s = &f->src[0];
        x = put(0, x, head(ui), "%s  source: %s", s->snap ? s->snap->sys.hostname : s->name,
                s->where);
    } else {
        unsigned ok = 0;
        for (unsigned i = 0; i < f->n_src; i++)
            ok += !f->src[i].err[0];
        x = put(0, x, head(ui), "%u hosts (%u answering)  source: agents over HTTP", f->n_src, ok);
    }
    put(0, COLS - 20 > x ? COLS - 20 : x + 1, head(ui), "%s  %gs", tb, ui->prefs.interval_s);
}

static void footer(struct top_ui *ui)
{
    static const char *const keys[][2] = {
        {"h", "Help"}, {"q", "Quit"},  {"/", "Filter"},     {"<>", "Sort"},
        {"t", "Tree"}, {"k", "Kill"},  {"Enter", "Detail"}, {"g", "Graph"},
        {"r", "Runs"}, {"[]", "GPUs"}, {"spc", "Tag"},
    };
    int x = 0, y = LINES - 1;

    move(y, 0);
    clrtoeol();
    for (size_t i = 0; i < sizeof keys / sizeof keys[0] && x < COLS; i++) {
        x = put(y, x, A_BOLD | col(ui, C_CYAN), "%s", keys[i][0]);
        x = put(y, x, 0, " %s ", keys[i][1]);
    }
}

static void message_line(struct top_ui *ui)
{
    int y = LINES - 2;
    const char *sig = ui->sig_name ? ui->sig_name : "TERM";

    move(y, 0);
    clrtoeol();
    switch (ui->mode) {
    case TOP_MODE_FILTER:
        put(y, 0, A_BOLD, "filter: ");
        put(y, 8, 0, "%s_   (Enter keeps it, Esc clears)", ui->filter);
        break;
    case TOP_MODE_SIGNAL:
        put(y, 0, A_BOLD | col(ui, C_YELLOW),
            "signal %u process%s: 1 TERM  2 KILL  3 INT  (Esc cancels)", ui->n_targets,
            ui->n_targets == 1 ? "" : "es");
        break;
    case TOP_MODE_CONFIRM:
        if (ui->n_targets == 1)
            put(y, 0, A_BOLD | col(ui, C_RED), "send SIG%s to pid %u (%s)? y/N", sig,
                ui->targets[0].pid, ui->targets[0].what);
        else
            put(y, 0, A_BOLD | col(ui, C_RED), "send SIG%s to %u processes (pid %u, ...)? y/N", sig,
                ui->n_targets, ui->targets[0].pid);
        break;
    default:
        if (ui->msg[0])
            put(y, 0, ui->msg_err ? A_BOLD | col(ui, C_RED) : col(ui, C_GREEN), "%s", ui->msg);
        break;
    }
}

void top_draw(struct top_ui *ui)
{
    const struct top_frame *f = ui->f;
    int H = LINES, avail, lower_min, y, need = 0;
    unsigned total = 0, shown = 0, first_shown = 0, k = 0;

    erase();
    if (ui->mode == TOP_MODE_HELP) {
        help_screen();
        refresh();
        return;
    }
    if (ui->mode == TOP_MODE_DETAIL) {
        footer(ui);
        detail_screen(ui);
        refresh();
        return;
    }
    header(ui);
    avail = H - 3;
    lower_min = avail >= 14 ? 7 : avail / 2;
    for (unsigned si = 0; si < f->n_src; si++) {
        const struct top_srcframe *s = &f->src[si];
        if (f->n_src > 1 || s->err[0] || !s->snap)
            need++;
        if (!s->snap)
            continue;
        for (unsigned gi = 0; gi < s->snap->n_gpus; gi++, total++)
            need += block_height(&s->snap->gpus[gi]);
    }
    ui->n_gpus_total = total;
    if (need <= avail - lower_min)
        ui->gpu_top = 0;
    if (ui->gpu_top >= total)
        ui->gpu_top = total ? total - 1 : 0;
    {
        int scroll = need > avail - lower_min;
        int gmax = 1 + avail - lower_min - (scroll ? 1 : 0);
        y = 1;
        for (unsigned si = 0; si < f->n_src; si++) {
            const struct top_srcframe *s = &f->src[si];
            unsigned ng = s->snap ? s->snap->n_gpus : 0;
            if ((f->n_src > 1 || s->err[0] || !s->snap) && y < gmax &&
                (k + ng > ui->gpu_top || !ng)) {
                int x = put(y, 0, A_BOLD | col(ui, C_BLUE), "-- %s ", s->name);
                if (s->err[0]) {
                    /* the whole message, wrapped over up to three lines */
                    char m[600];
                    size_t off = 0, len;
                    snprintf(m, sizeof m, "%s%s", s->err,
                             s->snap ? " (showing its last answer)" : "");
                    len = strlen(m);
                    for (int l = 0; l < 3 && off < len && y < gmax; l++, y++) {
                        int w = COLS - x > 8 ? COLS - x : 8;
                        put(y, x, A_BOLD | col(ui, C_RED), "%.*s", w, m + off);
                        off += (size_t)w < len - off ? (size_t)w : len - off;
                        x = 3;
                    }
                } else {
                    put(y, x, A_DIM, "%s, %u GPU%s", s->where, ng, ng == 1 ? "" : "s");
                    y++;
                }
            }
            for (unsigned gi = 0; gi < ng; gi++, k++) {
                int hgt;
                if (k < ui->gpu_top)
                    continue;
                hgt = block_height(&s->snap->gpus[gi]);
                if (y + hgt > gmax && shown > 0)
                    continue;
                if (!shown)
                    first_shown = k;
                y += gpu_block(ui, y, gmax, s, gi);
                shown++;
            }
        }
        if (scroll) {
            put(y, 0, A_BOLD | A_REVERSE | col(ui, C_YELLOW), " GPUs %u-%u of %u ", first_shown + 1,
                first_shown + shown, total);
            put(y, 22, A_BOLD, "] next  [ previous%s",
                first_shown + shown < total ? "  (more below)" : "");
            y++;
        }
    }
    if (ui->prefs.runs_panel)
        runs_panel(ui, y, H - 2 - y);
    else
        proc_table(ui, y, H - 2 - y);
    message_line(ui);
    footer(ui);
    refresh();
}

void top_draw_init_colors(int *color)
{
    if (*color && has_colors() && start_color() == OK) {
        use_default_colors();
        init_pair(C_GREEN, COLOR_GREEN, -1);
        init_pair(C_YELLOW, COLOR_YELLOW, -1);
        init_pair(C_RED, COLOR_RED, -1);
        init_pair(C_CYAN, COLOR_CYAN, -1);
        init_pair(C_MAGENTA, COLOR_MAGENTA, -1);
        init_pair(C_BLUE, COLOR_BLUE, -1);
        init_pair(C_HEAD, COLOR_BLACK, COLOR_CYAN);
    } else {
        *color = 0;
    }
}
