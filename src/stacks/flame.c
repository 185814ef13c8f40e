/*
 * The SVG flame graph writer (flame.h). Frames narrower than a tenth of a pixel are left out
 * with everything above them; colours come from a hash of the frame's name so that the same
 * function keeps its colour between graphs.
 */
#include "stacks/flame.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpuscope/gs_err.h"
#include "stacks/profile.h"

#define W 1200.0
#define ROW 16
#define TOP 40
#define MAX_DEPTH 1024

static void put_xml(FILE *out, const char *s, size_t max)
{
    size_t n = 0;
    for (; *s && n < max; s++, n++) {
        switch (*s) {
        case '<':
            fputs("&lt;", out);
            break;
        case '>':
            fputs("&gt;", out);
            break;
        case '&':
            fputs("&amp;", out);
            break;
        case '"':
            fputs("&quot;", out);
            break;
        default:
            if ((unsigned char)*s >= 0x20 || *s == '\t')
                fputc(*s, out);
        }
    }
    if (*s && max >= 2)
        fputs("..", out);
}

static uint32_t hash(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

static unsigned max_depth(const struct gs_stackprof *p)
{
    unsigned best = 0;
    for (uint32_t i = 1; i < p->nnodes; i++) {
        unsigned d = 0;
        for (uint32_t c = i; c != 0 && c != GS_PROF_NONE && d < MAX_DEPTH; c = p->nodes[c].parent)
            d++;
        if (d > best)
            best = d;
    }
    return best;
}

struct item {
    uint32_t node;
    double x;
    unsigned depth;
};

int gs_flame_write_svg(const struct gs_stackprof *p, const char *title, FILE *out,
                       struct gs_err *err)
{
    unsigned depth = max_depth(p);
    int height = TOP + (int)(depth + 1) * ROW + 10;
    double total = (double)p->nodes[0].total;
    struct item *st = malloc((p->nnodes + 1) * sizeof *st);
    uint32_t n = 0;

    if (!st)
        return gs_err_set(err, GS_ENOMEM, "stacks: out of memory");
    fprintf(out,
            "<?xml version=\"1.0\" standalone=\"no\"?>\n"
            "<svg version=\"1.1\" width=\"%.0f\" height=\"%d\" viewBox=\"0 0 %.0f %d\" "
            "xmlns=\"http://www.w3.org/2000/svg\">\n"
            "<style>text{font-family:monospace;font-size:11px;fill:#000}"
            "rect{stroke:#fff;stroke-width:0.5}</style>\n"
            "<rect x=\"0\" y=\"0\" width=\"100%%\" height=\"100%%\" fill=\"#fdfdf6\"/>\n"
            "<text x=\"%.0f\" y=\"20\" text-anchor=\"middle\" style=\"font-size:15px\">",
            W + 20, height, W + 20, height, (W + 20) / 2);
    put_xml(out, title, 200);
    fprintf(out, " (%llu samples)</text>\n", (unsigned long long)p->nodes[0].total);
    if (total > 0 && p->nodes[0].child != GS_PROF_NONE)
        st[n++] = (struct item){p->nodes[0].child, 10.0, 0};
    while (n) {
        struct item it = st[--n];
        const struct gs_prof_node *nd = &p->nodes[it.node];
        double w = (double)nd->total / total * W;
        if (nd->sibling != GS_PROF_NONE)
            st[n++] = (struct item){nd->sibling, it.x + w, it.depth};
        if (w < 0.1)
            continue;
        {
            const struct gs_prof_label *l = &p->labels[nd->frame];
            uint32_t h = hash(l->name);
            int y = height - 10 - (int)(it.depth + 1) * ROW;
            size_t chars = (size_t)((w - 4) / 6.6);
            fprintf(out, "<g><title>");
            put_xml(out, l->name, 300);
            if (l->file[0]) {
                fputs(" (", out);
                put_xml(out, l->file, 300);
                fputc(')', out);
            }
            fprintf(out, ": %llu samples, %.2f%%</title>", (unsigned long long)nd->total,
                    100.0 * (double)nd->total / total);
            fprintf(out,
                    "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" "
                    "fill=\"rgb(%u,%u,%u)\"/>",
                    it.x, y, w, ROW - 1, 205 + h % 50, 80 + (h >> 8) % 130, 40 + (h >> 16) % 50);
            if (chars >= 3) {
                fprintf(out, "<text x=\"%.2f\" y=\"%d\">", it.x + 3, y + ROW - 4);
                put_xml(out, l->name, chars > 2 ? chars - 2 : chars);
                fputs("</text>", out);
            }
            fputs("</g>\n", out);
        }
        if (nd->child != GS_PROF_NONE && it.depth + 1 < MAX_DEPTH)
            st[n++] = (struct item){nd->child, it.x, it.depth + 1};
    }
    fputs("</svg>\n", out);
    free(st);
    return ferror(out) ? gs_err_set(err, GS_EIO, "stacks: writing the SVG failed") : GS_OK;
}
