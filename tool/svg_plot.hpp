// The `xsampler dist --svg FILE` picture: one row's distribution after each
// stage of the run-time sampler's chain (sampler::trace), written as SVG by
// hand.
//
// One panel per traced stage, top to bottom: the first is the softmax of the
// row as given, then one after each stage that runs (neutral built-ins are
// not in the chain, so they have no panel). Every panel shows the same bars,
// in the same order: the N most probable tokens of the first panel (ties:
// lower id first), labelled with their words when the model has words, else
// their ids. A kept token's bar is its probability after the stage
// (renormalised over the kept set); a token the stages dropped is a hatched
// grey bar at its probability in the first panel, so the eye sees what was
// cut. The panel's title is the stage with its parameters ("top_p 0.9"; a
// stage the tool does not know, a user's for instance, by its name alone),
// and its right corner the size of the kept set: "kept 12 of 50257", 50257
// the row's length. Every panel shares one probability axis, linear from 0 or
// log (decades), so heights compare across panels.
//
// The output is a function of its input alone (fixed layout, numbers printed
// with fixed formats, no time or locale), so the same row and flags give the
// same bytes. Text is XML-escaped; bytes outside printable ASCII show as '?'.
#ifndef XSAMPLER_TOOL_SVG_PLOT_HPP
#define XSAMPLER_TOOL_SVG_PLOT_HPP

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include <xsampler/xsampler.hpp>

namespace tool::svg
{
    /// One stage's panel: for each bar, whether the stage's set keeps the token and its
    /// probability there (0 if dropped).
    struct panel
    {
        std::string stage;  ///< the traced name ("logits", "top_p", a custom stage's)
        std::string title;  ///< the name with its parameters
        std::size_t kept = 0;
        std::vector<double> probs;
        std::vector<bool> kept_bar;
    };

    struct figure
    {
        std::string source;               ///< where the row came from, for the heading
        std::size_t vocab = 0;            ///< the row's length
        std::vector<std::string> labels;  ///< one per bar
        std::vector<xsampler::token_id> ids;
        std::vector<double> first;        ///< each bar's probability in the first panel
        std::vector<panel> panels;
        bool log_scale = false;
    };

    /// Printable ASCII with & < > " ' escaped; any other byte as '?'.
    inline std::string escape(const std::string& text)
    {
        std::string out;
        for (const char ch : text)
        {
            switch (ch)
            {
            case '&': out += "&amp;"; break;
            case '<': out += "&lt;"; break;
            case '>': out += "&gt;"; break;
            case '"': out += "&quot;"; break;
            case '\'': out += "&apos;"; break;
            default: out += ch >= 0x20 && ch < 0x7f ? ch : '?';
            }
        }
        return out;
    }

    /// A number as printf's %g prints it (6 significant digits, no locale: the tool sets none).
    inline std::string number(double v)
    {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%g", v);
        return buf;
    }

    /// Traces `row` through `s` and keeps, per stage, the `bars` tokens that rank first in
    /// the first panel. label(id) names a bar. A random filter (xtc) draws its uniform from
    /// `rng`, given as the last argument (sampler::trace).
    template <class Row, class... Rng>
    figure trace_figure(xsampler::sampler& s, const Row& row, const xsampler::token_history& history,
                        std::size_t bars, const std::function<std::string(xsampler::token_id)>& label, Rng&... rng)
    {
        std::vector<std::pair<std::string, xsampler::distribution>> traced;
        figure f;
        s.trace(row, history, rng..., [&](const std::string& name, auto& c) {
            traced.emplace_back(name, xsampler::distribution_of(c));
            f.vocab = c.vocab();
        });
        const auto& first = traced.front().second;
        const std::size_t n = std::min(bars, first.ids.size());
        f.ids.assign(first.ids.begin(), first.ids.begin() + std::ptrdiff_t(n));
        f.first.assign(first.probs.begin(), first.probs.begin() + std::ptrdiff_t(n));
        std::unordered_map<xsampler::token_id, std::size_t> bar_of;
        for (std::size_t i = 0; i < n; ++i)
        {
            bar_of.emplace(f.ids[i], i);
            f.labels.push_back(label(f.ids[i]));
        }
        // Titles: the logits, then each stage in its own words (sampler::describe_stages).
        std::vector<std::string> titles = s.describe_stages();
        titles.insert(titles.begin(), "softmax of the logits");
        for (std::size_t i = 0; i < traced.size(); ++i)
        {
            const auto& [name, d] = traced[i];
            panel p{name, titles.at(i), d.ids.size(), std::vector<double>(n, 0.0), std::vector<bool>(n, false)};
            for (std::size_t j = 0; j < d.ids.size(); ++j)
            {
                const auto it = bar_of.find(d.ids[j]);
                if (it != bar_of.end())
                {
                    p.probs[it->second] = d.probs[j];
                    p.kept_bar[it->second] = true;
                }
            }
            f.panels.push_back(std::move(p));
        }
        return f;
    }

    namespace detail
    {
        // Layout, in SVG user units (pixels).
        constexpr double width = 1000, left = 72, right = 24;
        constexpr double line_h = 18;                    // a line of the heading
        constexpr double title_h = 32, plot_h = 150, gap = 10;
        constexpr std::size_t label_chars = 16;          // longer labels are cut, with "..."
        constexpr std::size_t chain_chars = 110;         // the chain's lines in the heading

        inline std::string fixed(double v)
        {
            char buf[32];
            std::snprintf(buf, sizeof buf, "%.1f", v);
            return buf;
        }

        // The axis: where a probability lands, as a fraction of the plot's height.
        struct axis
        {
            bool log = false;
            double top = 1;         // linear: the axis' top; log: its top decade (10^top)
            double bottom = 0;      // log: its bottom decade
            std::vector<double> ticks;

            double at(double prob) const
            {
                if (!log)
                {
                    return std::min(prob / top, 1.0);
                }
                if (!(prob > 0.0))
                {
                    return 0.0;
                }
                return std::clamp((std::log10(prob) - bottom) / (top - bottom), 0.0, 1.0);
            }

            std::string tick_label(double t) const
            {
                if (log)
                {
                    return t >= -3 ? number(std::pow(10.0, t)) : "1e" + std::to_string(int(t));
                }
                return number(t);
            }
        };

        inline axis make_axis(const figure& f)
        {
            double highest = 0, lowest = 1;
            for (const auto& p : f.panels)
            {
                for (std::size_t i = 0; i < p.probs.size(); ++i)
                {
                    const double h = p.kept_bar[i] ? p.probs[i] : f.first[i];
                    highest = std::max(highest, h);
                    lowest = h > 0 ? std::min(lowest, h) : lowest;
                }
            }
            axis a;
            a.log = f.log_scale;
            if (a.log)
            {
                a.top = std::min(0.0, std::ceil(std::log10(std::max(highest, 1e-300)) - 1e-9));
                a.bottom = std::max(std::floor(std::log10(lowest)), -12.0);
                a.bottom = std::min(a.bottom, a.top - 1);
                const double step = std::ceil((a.top - a.bottom) / 6);
                for (double t = a.top; t >= a.bottom; t -= step)
                {
                    a.ticks.push_back(t);
                }
                return a;
            }
            // The smallest 1, 2 or 5 x 10^e step that covers `highest` in at most 5 steps.
            double step = 1e-12;
            for (int e = -12; e <= 0; ++e)
            {
                for (const double m : {1.0, 2.0, 5.0})
                {
                    const double s = m * std::pow(10.0, e);
                    if (step == 1e-12 && highest <= 5 * s)
                    {
                        step = s;
                    }
                }
            }
            const int steps = std::max(1, int(std::ceil(highest / step - 1e-9)));
            a.top = std::min(1.0, steps * step);
            for (int i = 0; i <= steps; ++i)
            {
                a.ticks.push_back(std::min(1.0, i * step));
            }
            return a;
        }

        inline std::string cut(const std::string& label)
        {
            return label.size() <= label_chars ? label : label.substr(0, label_chars - 3) + "...";
        }
    }

    /// The SVG document of a figure.
    inline std::string render(const figure& f)
    {
        using namespace detail;
        const axis a = make_axis(f);
        const double plot_w = width - left - right;
        const std::size_t n = f.ids.size();
        const double slot = n > 0 ? plot_w / double(n) : plot_w;
        const double bar_w = slot * 0.72;
        // Labels at -45 degrees: a font small enough that neighbours do not touch, and a band
        // below the axis as deep as the longest label (about 0.6 em a character).
        const double label_font = std::clamp(slot * 0.55, 7.0, 12.0);
        std::size_t longest = 1;
        for (const auto& label : f.labels)
        {
            longest = std::max(longest, cut(label).size());
        }
        const double labels_h = std::max(40.0, 22 + 0.6 * label_font * double(longest) * 0.7071);
        const double panel_h = title_h + plot_h + labels_h + gap;
        // The chain, in lines of at most chain_chars characters, cut between stages.
        std::vector<std::string> chain_lines(1);
        std::size_t chars = 0;
        for (std::size_t i = 1; i < f.panels.size(); ++i)
        {
            const std::string& title = f.panels[i].title;
            if (i > 1 && chars + 3 + title.size() > chain_chars)
            {
                chain_lines.back() += " &#8594;";
                chain_lines.emplace_back();
                chars = 0;
            }
            else if (i > 1)
            {
                chain_lines.back() += " &#8594; ";
                chars += 3;
            }
            chain_lines.back() += escape(title);
            chars += title.size();
        }
        const double chain_h = line_h * double(chain_lines.size());
        const double heading = 94 + chain_h;
        const double height = heading + double(f.panels.size()) * panel_h + 8;
        std::string o;
        o += "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
        o += "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + fixed(width) + "\" height=\"" + fixed(height) +
             "\" viewBox=\"0 0 " + fixed(width) + " " + fixed(height) +
             "\" font-family=\"DejaVu Sans, Verdana, Arial, sans-serif\">\n";
        o += "<defs><pattern id=\"dropped\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
             "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#f0f0f0\"/>"
             "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#a8a8a8\" stroke-width=\"2.5\"/></pattern></defs>\n";
        o += "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n";

        // Heading: what, from where, the chain, the legend.
        double shown_mass = 0;
        for (const double p : f.first)
        {
            shown_mass += p;
        }
        o += "<text x=\"" + fixed(left) + "\" y=\"26\" font-size=\"18\" font-weight=\"bold\" fill=\"#202020\">"
             "The distribution after each stage</text>\n";
        o += "<text x=\"" + fixed(left) + "\" y=\"48\" font-size=\"13\" fill=\"#404040\">" + escape(f.source) +
             "</text>\n";
        for (std::size_t j = 0; j < chain_lines.size(); ++j)
        {
            o += "<text x=\"" + fixed(left) + "\" y=\"" + fixed(66 + line_h * double(j)) +
                 "\" font-size=\"13\" fill=\"#404040\">" + (j == 0 ? "chain: " : "&#160;&#160;&#160;&#160;") +
                 (f.panels.size() < 2 ? std::string("none (the plain softmax)") : chain_lines[j]) + "</text>\n";
        }
        char mass[96];
        std::snprintf(mass, sizeof mass, "bars: the %zu most probable tokens of the row (%.1f%% of its mass)", n,
                      100.0 * shown_mass);
        o += "<text x=\"" + fixed(left) + "\" y=\"" + fixed(66 + chain_h) + "\" font-size=\"13\" fill=\"#404040\">" + std::string(mass) +
             "</text>\n";
        const double legend_y = 78 + chain_h;
        o += "<g class=\"legend\" font-size=\"12\" fill=\"#404040\">"
             "<rect x=\"" + fixed(left) + "\" y=\"" + fixed(legend_y) +
             "\" width=\"14\" height=\"10\" fill=\"#3a6ea5\"/><text x=\"" + fixed(left + 20) + "\" y=\"" +
             fixed(legend_y + 9.5) + "\">kept: probability after the stage, renormalised</text>"
             "<rect x=\"" + fixed(left + 330) + "\" y=\"" + fixed(legend_y) +
             "\" width=\"14\" height=\"10\" fill=\"url(#dropped)\" stroke=\"#a8a8a8\"/><text x=\"" + fixed(left + 350) +
             "\" y=\"" + fixed(legend_y + 9.5) + "\">dropped: its probability in the first panel</text>"
             "<text x=\"" + fixed(width - right) + "\" y=\"" + fixed(legend_y + 9.5) + "\" text-anchor=\"end\">" +
             (a.log ? "log scale" : "linear scale") + "</text></g>\n";

        for (std::size_t k = 0; k < f.panels.size(); ++k)
        {
            const panel& p = f.panels[k];
            const double y0 = heading + double(k) * panel_h;
            const double plot_top = y0 + title_h;
            const double base = plot_top + plot_h;
            o += "<g class=\"panel\" data-stage=\"" + escape(p.stage) + "\" data-kept=\"" + std::to_string(p.kept) +
                 "\">\n";
            o += "<text x=\"" + fixed(left) + "\" y=\"" + fixed(y0 + 19) +
                 "\" font-size=\"14\" font-weight=\"bold\" fill=\"#202020\">" + std::to_string(k + 1) + ". " +
                 (k == 0 ? "" : "after ") + escape(p.title) + "</text>\n";
            o += "<text class=\"kept\" x=\"" + fixed(width - right) + "\" y=\"" + fixed(y0 + 19) +
                 "\" font-size=\"13\" text-anchor=\"end\" fill=\"#202020\">kept " + std::to_string(p.kept) + " of " +
                 std::to_string(f.vocab) + "</text>\n";
            // Grid and ticks.
            for (const double t : a.ticks)
            {
                const double y = base - plot_h * a.at(a.log ? std::pow(10.0, t) : t);
                o += "<line x1=\"" + fixed(left) + "\" y1=\"" + fixed(y) + "\" x2=\"" + fixed(width - right) +
                     "\" y2=\"" + fixed(y) + "\" stroke=\"#e4e4e4\" stroke-width=\"1\"/>";
                o += "<text x=\"" + fixed(left - 6) + "\" y=\"" + fixed(y + 4) +
                     "\" font-size=\"11\" text-anchor=\"end\" fill=\"#606060\">" + a.tick_label(t) + "</text>\n";
            }
            // Bars and labels.
            for (std::size_t i = 0; i < n; ++i)
            {
                const bool kept = p.kept_bar[i];
                const double prob = kept ? p.probs[i] : f.first[i];
                const double h = plot_h * a.at(prob);
                const double x = left + slot * double(i) + (slot - bar_w) / 2;
                char tip[96];
                std::snprintf(tip, sizeof tip, "%s: p = %.6g%s", kept ? "kept" : "dropped", prob,
                              kept ? "" : " in the first panel");
                o += "<rect class=\"" + std::string(kept ? "kept" : "dropped") + "\" x=\"" + fixed(x) + "\" y=\"" +
                     fixed(base - h) + "\" width=\"" + fixed(bar_w) + "\" height=\"" + fixed(h) + "\" fill=\"" +
                     (kept ? "#3a6ea5" : "url(#dropped)") + "\"" + (kept ? "" : " stroke=\"#a8a8a8\"") + "><title>" +
                     escape(f.labels[i]) + " (id " + std::to_string(f.ids[i]) + ") " + tip + "</title></rect>";
                const double cx = left + slot * (double(i) + 0.5);
                if (kept && prob >= 0.01 && slot >= 30)  // the value of a bar tall enough to matter, if it fits
                {
                    char value[16];
                    std::snprintf(value, sizeof value, "%.2f", prob);
                    o += "<text x=\"" + fixed(cx) + "\" y=\"" + fixed(base - h - 3) +
                         "\" font-size=\"10\" text-anchor=\"middle\" fill=\"#303030\">" + value + "</text>";
                }
                o += "<text x=\"" + fixed(cx + 4) + "\" y=\"" + fixed(base + 14) + "\" font-size=\"" + fixed(label_font) + "\" fill=\"" +
                     (kept ? "#202020" : "#909090") + "\" text-anchor=\"end\" transform=\"rotate(-45 " +
                     fixed(cx + 4) + " " + fixed(base + 14) + ")\">" + escape(cut(f.labels[i])) + "</text>\n";
            }
            o += "<line x1=\"" + fixed(left) + "\" y1=\"" + fixed(base) + "\" x2=\"" + fixed(width - right) +
                 "\" y2=\"" + fixed(base) + "\" stroke=\"#808080\" stroke-width=\"1\"/>\n";
            o += "</g>\n";
        }
        o += "</svg>\n";
        return o;
    }
}

#endif
