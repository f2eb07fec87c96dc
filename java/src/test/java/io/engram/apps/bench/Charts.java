package io.engram.apps.bench;

import javax.imageio.ImageIO;
import java.awt.BasicStroke;
import java.awt.Color;
import java.awt.Font;
import java.awt.Graphics2D;
import java.awt.RenderingHints;
import java.awt.image.BufferedImage;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * A small grouped bar chart writer (java.awt, headless) for the YCSB
 * results: one PNG per thread count, throughput per phase (load, A, B, C,
 * F, D) for each store, log scale (the stores differ by orders of
 * magnitude).
 */
final class Charts {
    private Charts() {
    }

    /**
     * Redraws the plots and {@code results.md} of {@code DIR} from its
     * {@code results.csv} (a run cut short writes the CSV after every store
     * and thread count, the plots only at its end). Usage: {@code Charts DIR TITLE}.
     */
    public static void main(String[] args) throws IOException {
        Path dir = Path.of(args[0]);
        List<String> rows = java.nio.file.Files.readAllLines(dir.resolve("results.csv"));
        write(dir, rows);
        markdown(dir, rows, args[1]);
    }

    static final Color[] COLORS = {new Color(0x4C72B0), new Color(0xDD8452), new Color(0x55A868), new Color(0xC44E52)};

    static void write(Path dir, List<String> rows) throws IOException {
        System.setProperty("java.awt.headless", "true");
        Map<String, Map<String, Map<String, Double>>> byThreads = new LinkedHashMap<>();
        Set<String> stores = new LinkedHashSet<>();
        Set<String> phases = new LinkedHashSet<>();
        for (String r : rows.subList(1, rows.size())) {
            String[] c = r.split(",");
            if (!c[4].equals("ops/s")) {
                continue;
            }
            stores.add(c[0]);
            phases.add(c[2]);
            byThreads.computeIfAbsent(c[1], k -> new LinkedHashMap<>())
                    .computeIfAbsent(c[0], k -> new LinkedHashMap<>()).put(c[2], Double.parseDouble(c[3]));
        }
        for (var e : byThreads.entrySet()) {
            draw(dir.resolve("java-ycsb-" + e.getKey() + "t.png"), "YCSB throughput, " + e.getKey() + " client thread(s)",
                    new ArrayList<>(stores), new ArrayList<>(phases), e.getValue());
        }
    }

    /**
     * {@code results.md}: the throughput table (a row per store and thread
     * count, a column per phase) and the restart rows, from the CSV rows.
     */
    static void markdown(Path dir, List<String> rows, String title) throws IOException {
        Map<String, Map<String, String>> thr = new LinkedHashMap<>();
        Map<String, Map<String, String>> restart = new LinkedHashMap<>();
        Set<String> phases = new LinkedHashSet<>();
        for (String r : rows.subList(1, rows.size())) {
            String[] c = r.split(",");
            String key = c[0] + " | " + c[1];
            if (c[4].equals("ops/s")) {
                phases.add(c[2]);
                thr.computeIfAbsent(key, k -> new LinkedHashMap<>()).put(c[2], c[3]);
            } else {
                restart.computeIfAbsent(c[0], k -> new LinkedHashMap<>()).put(c[2], c[3]);
            }
        }
        StringBuilder md = new StringBuilder("# " + title + "\n\nThroughput, ops/s:\n\n| store | threads |");
        phases.forEach(ph -> md.append(' ').append(ph).append(" |"));
        md.append("\n|---|---|").append("---|".repeat(phases.size())).append('\n');
        for (var e : thr.entrySet()) {
            md.append("| ").append(e.getKey()).append(" |");
            phases.forEach(ph -> md.append(' ').append(e.getValue().getOrDefault(ph, "-")).append(" |"));
            md.append('\n');
        }
        md.append("\nRestart with the data loaded:\n\n| store | open (recovery), ms | JVM start to serving, ms | items |\n|---|---|---|---|\n");
        for (var e : restart.entrySet()) {
            var v = e.getValue();
            md.append("| ").append(e.getKey()).append(" | ").append(v.getOrDefault("restart-open", "-")).append(" | ")
                    .append(v.getOrDefault("restart-jvm", "-")).append(" | ").append(v.getOrDefault("restart-items", "-"))
                    .append(" |\n");
        }
        java.nio.file.Files.writeString(dir.resolve("results.md"), md.toString());
    }

    private static void draw(Path file, String title, List<String> stores, List<String> phases,
                             Map<String, Map<String, Double>> v) throws IOException {
        int w = 900;
        int h = 480;
        int left = 80;
        int bottom = 60;
        int top = 50;
        BufferedImage img = new BufferedImage(w, h, BufferedImage.TYPE_INT_RGB);
        Graphics2D g = img.createGraphics();
        g.setRenderingHint(RenderingHints.KEY_ANTIALIASING, RenderingHints.VALUE_ANTIALIAS_ON);
        g.setColor(Color.WHITE);
        g.fillRect(0, 0, w, h);
        g.setColor(Color.BLACK);
        g.setFont(new Font(Font.SANS_SERIF, Font.BOLD, 16));
        g.drawString(title + " (ops/s, log scale)", left, 30);
        g.setFont(new Font(Font.SANS_SERIF, Font.PLAIN, 12));
        double max = 1;
        for (var m : v.values()) {
            for (double d : m.values()) {
                max = Math.max(max, d);
            }
        }
        double lmax = Math.ceil(Math.log10(max));
        int ph = h - top - bottom;
        for (int p = 0; p <= lmax; p++) {
            int y = h - bottom - (int) (ph * p / lmax);
            g.setColor(new Color(0xDDDDDD));
            g.drawLine(left, y, w - 20, y);
            g.setColor(Color.BLACK);
            g.drawString(String.format("1e%d", p), 30, y + 4);
        }
        int groupW = (w - left - 20) / phases.size();
        int barW = (groupW - 20) / Math.max(1, stores.size());
        for (int i = 0; i < phases.size(); i++) {
            int gx = left + i * groupW + 10;
            g.setColor(Color.BLACK);
            g.drawString(phases.get(i), gx + groupW / 2 - 15, h - bottom + 18);
            for (int s = 0; s < stores.size(); s++) {
                Double d = v.getOrDefault(stores.get(s), Map.of()).get(phases.get(i));
                if (d == null || d <= 0 || d.isNaN()) {
                    continue;
                }
                int bh = (int) (ph * Math.max(0, Math.log10(d)) / lmax);
                g.setColor(COLORS[s % COLORS.length]);
                g.fillRect(gx + s * barW, h - bottom - bh, barW - 2, bh);
            }
        }
        for (int s = 0; s < stores.size(); s++) {
            g.setColor(COLORS[s % COLORS.length]);
            g.fillRect(left + s * 150, h - 25, 14, 14);
            g.setColor(Color.BLACK);
            g.drawString(stores.get(s), left + s * 150 + 20, h - 13);
        }
        g.setStroke(new BasicStroke(1));
        g.drawLine(left, h - bottom, w - 20, h - bottom);
        g.dispose();
        ImageIO.write(img, "png", file.toFile());
    }
}
