"""The figures of the conventions page, drawn from the package's own geometry classes.

Run by ``docs/conf.py`` when the documentation is built (matplotlib, Agg); also runnable by hand::

    python docs/conventions_figures.py OUTDIR

Every coordinate drawn here comes from directpet (``ImageGrid.centres``, ``ViewSet``, ``View``,
``RotatingScanner``, ``DualHeadScanner``), so a change of convention in the package changes the figure.
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.patches import Circle, FancyArrowPatch, Rectangle  # noqa: E402

from directpet import ImageGrid  # noqa: E402

BLUE, ORANGE, GREEN, RED, GREY = "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#7f7f7f"


def _arrow(ax, start, end, colour, label=None, offset=(0, 0), **kw):
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=14, color=colour, lw=1.8, **kw))
    if label:
        ax.annotate(label, end, xytext=offset, textcoords="offset points", color=colour, fontsize=10,
                    ha="center", va="center")


def _save(fig, outdir: Path, name: str) -> Path:
    path = outdir / name
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


# --- the image grid ---------------------------------------------------------------------------------
def grid_figure(outdir: Path) -> Path:
    grid = ImageGrid((3, 4, 5), voxel_size=(2.0, 1.0, 1.0))
    xs, ys = grid.centres(2), grid.centres(1)
    vx, vy = grid.voxel_size[2], grid.voxel_size[1]
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4.4), gridspec_kw={"width_ratios": [1.25, 1]})
    for i, x in enumerate(xs):
        for j, y in enumerate(ys):
            ax.add_patch(Rectangle((x - vx / 2, y - vy / 2), vx, vy, fill=False, ec=GREY))
            ax.plot(x, y, ".", color=BLUE)
            ax.text(x, y - 0.22, f"[{j},{i}]", ha="center", va="top", fontsize=7, color=BLUE)
    _arrow(ax, (0, 0), (3.4, 0), RED, "+x (mm)", (8, 10))
    _arrow(ax, (0, 0), (0, 2.6), RED, "+y (mm)", (0, 10))
    ax.plot(0, 0, "o", color=RED)
    ax.annotate("scanner axis\n(x = y = 0)", (0, 0), xytext=(3.0, -1.2), color=RED, fontsize=8,
                arrowprops=dict(arrowstyle="->", color=RED))
    for i, x in enumerate(xs):
        ax.text(x, ys[0] - 0.95, f"ix={i}\nx={x:+g}", ha="center", va="top", fontsize=8)
    for j, y in enumerate(ys):
        ax.text(xs[0] - 0.7, y, f"iy={j}, y={y:+g}", ha="right", va="center", fontsize=8)
    ax.set_xlim(xs[0] - 3.3, xs[-1] + 2.6)
    ax.set_ylim(ys[0] - 2.0, ys[-1] + 1.4)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title("one slice of ImageGrid((3, 4, 5), voxel_size=(2, 1, 1)):\n"
                 "x_i = (i - (nx - 1)/2) vx, y_j = (j - (ny - 1)/2) vy; array index [iz, iy, ix]", fontsize=9)

    # the same slice as an image: origin='lower' and the extent in mm put +x right and +y up
    img = np.arange(grid.ny * grid.nx, dtype=np.float32).reshape(grid.ny, grid.nx)
    extent = (xs[0] - vx / 2, xs[-1] + vx / 2, ys[0] - vy / 2, ys[-1] + vy / 2)
    im = ax2.imshow(img, origin="lower", extent=extent, cmap="viridis")
    for i, x in enumerate(xs):
        for j, y in enumerate(ys):
            ax2.text(x, y, f"{int(img[j, i])}", ha="center", va="center", color="w", fontsize=8)
    ax2.set_xlabel("x (mm)")
    ax2.set_ylabel("y (mm)")
    ax2.set_title("image[iz] shown with origin='lower', extent in mm\n(value = flat index iy * nx + ix)",
                  fontsize=9)
    fig.colorbar(im, ax=ax2, label="value", shrink=0.85)
    return _save(fig, outdir, "grid.png")


# --- DIRECT -----------------------------------------------------------------------------------------
def direct_figure(outdir: Path) -> Path:
    from directpet.direct import View, ViewSet

    vs = ViewSet(n_phi=8, n_theta=3, theta_max_deg=10.0)
    fig, axes = plt.subplots(1, 3, figsize=(15, 5.2), gridspec_kw={"width_ratios": [1.1, 1, 1]})

    # (a) transaxial: azimuth bins over [0, pi), a view's axes, the signed LOR distance
    ax = axes[0]
    R = 1.0
    ax.add_patch(Circle((0, 0), R, fill=False, ec=GREY, lw=1))
    for e in vs.phi_edges:
        ax.plot([-R * np.cos(e), R * np.cos(e)], [-R * np.sin(e), R * np.sin(e)], color=GREY, lw=0.6, ls=":")
    for k, c in enumerate(vs.phi_centres):
        ax.text(1.1 * R * np.cos(c), 1.1 * R * np.sin(c), f"k={k}", ha="center", va="center", fontsize=8)
    k = 1
    view = vs[vs.index(k, 1)]
    wedge = np.linspace(vs.phi_edges[k], vs.phi_edges[k + 1], 20)
    ax.fill(np.r_[0, R * np.cos(wedge), 0], np.r_[0, R * np.sin(wedge), 0], color=BLUE, alpha=0.12)
    et, er = view.direction[:2], view.radial_axis[:2]
    _arrow(ax, (0, 0), tuple(0.75 * et), BLUE, "e_t (TOF axis)", (18, 10))
    _arrow(ax, (0, 0), tuple(0.55 * er), ORANGE, "e_r (radial)", (-10, 10))
    p = np.array([0.35, -0.55])
    s = float(p @ er)
    ax.plot(*p, "o", color=GREEN)
    ax.plot(*np.stack([p - 0.6 * et, p + 0.6 * et]).T, color=GREEN, lw=1)       # a LOR of the view through p
    ax.plot([0, s * er[0]], [0, s * er[1]], color=GREEN, lw=3, alpha=0.6)
    ax.annotate(f"s = -x sin(phi) + y cos(phi) = {s:+.2f}\n(signed LOR distance of the voxel)", p,
                xytext=(-20, -42), textcoords="offset points", color=GREEN, fontsize=8)
    # canonicalisation: u with azimuth in [pi, 2 pi) becomes -u
    u = np.array([np.cos(np.deg2rad(250)), np.sin(np.deg2rad(250))])
    _arrow(ax, (0, 0), tuple(0.7 * u), RED, "u: azimuth 250 deg", (-30, -10), ls="--")
    _arrow(ax, (0, 0), tuple(-0.6 * u), RED, "-u: 70 deg (canonical)", (10, 14))
    ax.set_xlim(-1.35, 1.35)
    ax.set_ylim(-1.25, 1.3)
    ax.set_aspect("equal")
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    ax.set_title(f"(a) transaxial plane: {vs.n_phi} azimuth bins over [0, 180) deg,\n"
                 f"view k={k}: phi_k = (k + 1/2) 180/n_phi = {np.rad2deg(view.phi):g} deg", fontsize=9)

    # (b) the co-polar tilt bins
    ax = axes[1]
    for e in vs.theta_edges:
        ax.plot([0, np.cos(e)], [0, np.sin(e)], color=GREY, lw=0.8, ls=":")
    for l, c in enumerate(vs.theta_centres):
        v = View(view.phi, c)
        _arrow(ax, (0, 0), (0.9 * np.cos(c), 0.9 * np.sin(c)), BLUE)
        ax.text(0.98 * np.cos(c), 0.98 * np.sin(c), f"l={l}: theta={np.rad2deg(c):+.2f} deg\n"
                f"e_a=({v.axial_axis[0]:+.2f}, {v.axial_axis[1]:+.2f}, {v.axial_axis[2]:+.2f})",
                fontsize=8, va="center")
    ax.text(0.05, -0.22, f"edges at {', '.join(f'{np.rad2deg(e):+.2f}' for e in vs.theta_edges)} deg\n"
            "tilts outside +-theta_max: no view (-1)", fontsize=8)
    ax.set_xlim(-0.05, 1.6)
    ax.set_ylim(-0.35, 0.45)
    ax.set_xlabel("transaxial component of u (along phi_k)")
    ax.set_ylabel("z (scanner axis)")
    ax.set_title(f"(b) co-polar tilt: {vs.n_theta} equal-angle bins over +-{vs.theta_max_deg:g} deg\n"
                 "u = (cos theta cos phi, cos theta sin phi, sin theta)", fontsize=9)

    # (c) the data layout: v = k * n_theta + l, and the geometric visiting order
    ax = axes[2]
    order = vs.geometric_order()
    rank = {v: i for i, v in enumerate(order)}
    for kk in range(vs.n_phi):
        for ll in range(vs.n_theta):
            v = vs.index(kk, ll)
            ax.add_patch(Rectangle((kk, ll), 0.95, 0.95, fc=plt.cm.viridis(rank[v] / len(order)), ec="w"))
            tc = "w" if rank[v] < 0.6 * len(order) else "k"
            ax.text(kk + 0.47, ll + 0.6, f"v={v}", ha="center", va="center", fontsize=7, color=tc)
            ax.text(kk + 0.47, ll + 0.28, f"#{rank[v]}", ha="center", va="center", fontsize=6, color=tc)
    ax.set_xlim(0, vs.n_phi)
    ax.set_ylim(0, vs.n_theta)
    ax.set_xticks(np.arange(vs.n_phi) + 0.47, [str(i) for i in range(vs.n_phi)])
    ax.set_yticks(np.arange(vs.n_theta) + 0.47, [str(i) for i in range(vs.n_theta)])
    ax.set_xlabel("azimuth bin k")
    ax.set_ylabel("tilt bin l")
    ax.set_title("(c) histo-image stack (n_views, nz, ny, nx), view v = k n_theta + l;\n"
                 "#: position in ViewSet.geometric_order() (block-RAMLA's order)", fontsize=9)
    fig.tight_layout()
    return _save(fig, outdir, "direct_views.png")


# --- FIRST ------------------------------------------------------------------------------------------
def first_figure(outdir: Path) -> Path:
    from directpet.first import RotatingScanner

    sc = RotatingScanner()
    fig, axes = plt.subplots(1, 3, figsize=(15, 5.2), gridspec_kw={"width_ratios": [1.05, 1.2, 0.9]})

    # (a) transaxial: the two heads at angle a, LORs parallel to e_a, radial coordinate s along e_s
    ax = axes[0]
    a = 20
    phi = sc.angles_rad[a]
    ea = np.array([np.cos(phi), np.sin(phi)])
    es = np.array([-np.sin(phi), np.cos(phi)])
    half = 0.5 * sc.head_distance_mm
    width = 0.5 * sc.n_columns * sc.pitch_mm
    for sign, name in ((-1, "head A"), (1, "head B")):
        c = sign * (half + 0.5 * sc.depth_mm) * ea
        corners = [c + u * 0.5 * sc.depth_mm * ea + w * width * es for u, w in ((-1, -1), (1, -1), (1, 1), (-1, 1))]
        ax.fill(*np.array(corners).T, color=GREY, alpha=0.4)
        ax.text(*(c + (width + 14) * es), name, ha="center", va="center", fontsize=9)
    fov = 0.5 * sc.n_radial * sc.radial_bin_mm
    ax.add_patch(Circle((0, 0), fov, fill=False, ec=GREEN, lw=1))
    ax.text(0, -fov - 8, f"field of view: {2 * fov:g} mm", color=GREEN, ha="center", fontsize=8)
    for rho in np.linspace(0, sc.n_radial - 1, 7).astype(int):
        s = float(sc.radial_mm(rho))
        p0, p1 = s * es - half * ea, s * es + half * ea
        ax.plot(*np.stack([p0, p1]).T, color=BLUE, lw=0.7)
        if rho in (0, sc.n_radial // 2, sc.n_radial - 1):
            ax.text(*(p1 + (sc.depth_mm + 6) * ea), f"rho={rho}", fontsize=7, color=BLUE,
                    rotation=np.rad2deg(phi), va="center", ha="left", rotation_mode="anchor")
    _arrow(ax, (0, 0), tuple(40 * ea), RED, "e_a (A to B)", (10, -10))
    _arrow(ax, (0, 0), tuple(30 * es), ORANGE, "e_s (+s)", (-6, 10))
    ax.set_xlim(-140, 150)
    ax.set_ylim(-130, 130)
    ax.set_aspect("equal")
    ax.set_xlabel("x (mm)")
    ax.set_ylabel("y (mm)")
    ax.set_title(f"(a) transaxial: angle a={a}, phi = a 180/n_angles = {np.rad2deg(phi):g} deg;\n"
                 "LOR (a, ., ., rho) at s = (rho - (n_radial-1)/2) radial_bin along e_s", fontsize=9)

    # (b) axial plane of one LOR: rows r1 (head A) and r2 (head B), ring difference, slice kc
    ax = axes[1]
    small = RotatingScanner.small()
    n = small.n_rows
    zr = small.row_z_mm(np.arange(n))
    xa, xb = -0.5 * small.head_distance_mm, 0.5 * small.head_distance_mm
    for x0, sgn, name in ((xa, -1, "head A (r1)"), (xb, 1, "head B (r2)")):
        for r, z in enumerate(zr):
            ax.add_patch(Rectangle((x0 if sgn > 0 else x0 - small.depth_mm, z - small.crystal_mm / 2),
                                   small.depth_mm, small.crystal_mm, fc=GREY, alpha=0.5))
            ax.text(x0 + sgn * (small.depth_mm + 4), z, str(r), va="center", ha="center", fontsize=7)
        ax.text(x0 + sgn * small.depth_mm / 2, zr[-1] + 1.6, name, ha="center", fontsize=8)
    zs = (np.arange(small.n_slices) - 0.5 * (small.n_slices - 1)) * small.slice_mm
    for k, z in enumerate(zs):
        ax.plot([-25, 25], [z, z], color=GREEN, lw=0.5, alpha=0.6)
        ax.text(27, z, f"{k}", fontsize=6, color=GREEN, va="center")
    ax.text(22, zs[-1] + 0.7, "slice k", color=GREEN, fontsize=7)
    ax.set_ylim(zr[0] - 1.5, zr[-1] + 2.6)
    r1, r2 = 1, 4
    ax.plot([xa, xb], [zr[r1], zr[r2]], color=BLUE, lw=1.6)
    ax.annotate(f"LOR r1={r1}, r2={r2}: delta = r2 - r1 = {r2 - r1},\nkc = r1 + r2 = {r1 + r2} "
                "(the slice its centre crosses)", (0, 0.5 * (zr[r1] + zr[r2])), xytext=(-150, -95),
                textcoords="offset points", color=BLUE, fontsize=8,
                arrowprops=dict(arrowstyle="->", color=BLUE))
    ax.set_xlabel("along the LOR, e_a (mm)")
    ax.set_ylabel("z (mm)")
    ax.set_title(f"(b) axial plane (RotatingScanner.small(): {n} rows, {small.n_slices} slices of pitch/2)\n"
                 "z_r = (r - (n_rows-1)/2) pitch; slices of the image grid", fontsize=9)

    # (c) the (r1, r2) plane of one angle's sinogram: ring difference and slice
    ax = axes[2]
    delta, m, kc = small.lor_rows()
    im = ax.imshow(delta, origin="lower", cmap="coolwarm", vmin=-(n - 1), vmax=n - 1)
    for i in range(n):
        for j in range(n):
            ax.text(j, i, f"{kc[i, j]}", ha="center", va="center", fontsize=7)
    ax.set_xlabel("r2 (row on head B)")
    ax.set_ylabel("r1 (row on head A)")
    fig.colorbar(im, ax=ax, label="delta = r2 - r1", shrink=0.8)
    ax.set_title("(c) sinogram[a, r1, r2, rho]: one angle's\n(r1, r2) plane; number = slice kc = r1 + r2",
                 fontsize=9)
    fig.tight_layout()
    return _save(fig, outdir, "first_geometry.png")


# --- dual-head --------------------------------------------------------------------------------------
def dualhead_figure(outdir: Path) -> Path:
    from directpet.dualhead import SIGNS, DualHeadScanner

    sc = DualHeadScanner.small()
    fig, axes = plt.subplots(1, 3, figsize=(15, 5.4), gridspec_kw={"width_ratios": [1.0, 1.0, 1.25]})

    # (a) the heads, the planes and a LOR, in the (y, x) plane (a wider head than small()'s, to see it)
    ax = axes[0]
    wide = DualHeadScanner.small(n_y=20)
    ys = wide.crystal_y_mm(np.arange(wide.n_y))
    g, d = wide.gap_mm / 2, wide.depth_mm
    for x0, name in ((g, "upper head (c_u)"), (-g - d, "lower head (c_l)")):
        for y in ys:
            ax.add_patch(Rectangle((y - wide.crystal_mm / 2, x0), wide.crystal_mm, d, fc=GREY, alpha=0.5))
        ax.text(0, x0 + d / 2, name, ha="center", va="center", fontsize=8)
    for p in range(wide.n_planes):
        x = float(wide.plane_x_mm(p))
        ax.plot([ys[0] - 1, ys[-1] + 1], [x, x], color=GREEN, lw=0.5, alpha=0.6)
        if p % 2 == 0:
            ax.text(ys[-1] + 2, x, f"p={p}", fontsize=6, color=GREEN, va="center")
    cu, cl = 5, 12
    ax.plot([ys[cu], ys[cl]], [g, -g], color=BLUE, lw=1.6)
    ax.annotate(f"c_uy={cu}, c_ly={cl}\ndelta_y = c_ly - c_uy = {cl - cu}", (0.5 * (ys[cu] + ys[cl]), 0),
                xytext=(-110, 40), textcoords="offset points", fontsize=8, color=BLUE,
                arrowprops=dict(arrowstyle="->", color=BLUE))
    _arrow(ax, (ys[0] - 6, -g - d), (ys[0] - 6, -g - d + 12), RED, "+x", (0, 8))
    _arrow(ax, (ys[0] - 6, -g - d), (ys[0] + 6, -g - d), RED, "+y", (8, 0))
    ax.set_xlabel("y (mm)")
    ax.set_ylabel("x (mm), perpendicular to the heads")
    ax.set_title(f"(a) DualHeadScanner.small(n_y={wide.n_y}): {wide.n_planes} planes of {wide.plane_mm:g} mm\n"
                 "x_p = (p - (n_planes-1)/2) plane_mm; image[v_z, v_y, p]", fontsize=9)
    ax.set_aspect("equal")

    # (b) crystal faces (y, z): a LOR's orientation and its class
    ax = axes[1]
    ys, zs = sc.crystal_y_mm(np.arange(sc.n_y)), sc.crystal_z_mm(np.arange(sc.n_z))
    for y in ys:
        for z in zs:
            ax.add_patch(Rectangle((y - sc.crystal_mm / 2, z - sc.crystal_mm / 2), sc.crystal_mm, sc.crystal_mm,
                                   fc="none", ec=GREY, lw=0.6))
    c_u, c_l = (5, 1), (2, 3)
    dy, dz = c_l[0] - c_u[0], c_l[1] - c_u[1]
    ay, az = abs(dy), abs(dz)
    k = ay * sc.n_z + az
    ax.plot(ys[c_u[0]], zs[c_u[1]], "s", color=ORANGE, ms=9, label=f"c_u = {c_u} (upper head)")
    ax.plot(ys[c_l[0]], zs[c_l[1]], "s", color=BLUE, ms=9, label=f"c_l = {c_l} (lower head)")
    _arrow(ax, (ys[c_u[0]], zs[c_u[1]]), (ys[c_l[0]], zs[c_l[1]]), RED)
    signs = sc.class_signs(k)
    s_idx = signs.index((int(np.sign(dy)) or 1, int(np.sign(dz)) or 1))
    ax.text(ys[0] - 1, zs[-1] + 2.5, f"delta = c_l - c_u = ({dy:+d}, {dz:+d}); class (a_y, a_z) = ({ay}, {az}),\n"
            f"k = a_y n_z + a_z = {k}; signs of class k:\n{signs}; this LOR: sign {s_idx}",
            fontsize=8, va="bottom")
    ax.set_xlabel("y (mm), crystal column c_y")
    ax.set_ylabel("z (mm), crystal row c_z")
    ax.set_ylim(zs[0] - 3, zs[-1] + 11)
    ax.set_aspect("equal")
    ax.legend(loc="lower right", fontsize=7)
    ax.set_title("(b) crystal faces (both heads): Y = (c_y - (n_y-1)/2) pitch,\nZ = (c_z - (n_z-1)/2) pitch",
                 fontsize=9)

    # (c) the LOR vector: class-major blocks, inside a class its signs, inside a sign shift positions
    ax = axes[2]
    offs = sc.class_offsets()
    for kk in range(sc.n_classes):
        ax.add_patch(Rectangle((offs[kk], 1.2), offs[kk + 1] - offs[kk], 0.6,
                               fc=plt.cm.tab20(kk % 20), ec="none"))
    ax.text(0, 2.0, f"full vector: {sc.n_classes} classes in index order, {sc.n_lors} LORs "
            "(class_offsets())", fontsize=8)
    # zoom on class k
    n_pos = (sc.n_y - ay) * (sc.n_z - az)
    span = offs[-1]
    scale = span / (len(signs) * n_pos)
    for si, sg in enumerate(signs):
        x0 = si * n_pos * scale
        ax.add_patch(Rectangle((x0, 0.0), n_pos * scale, 0.6, fc=plt.cm.Pastel1(si), ec="k", lw=0.6))
        ax.text(x0 + n_pos * scale / 2, 0.3, f"sign {si}: {sg}\n{n_pos} shifts (i, j)", ha="center",
                va="center", fontsize=7)
    ax.plot([offs[k], 0], [1.2, 0.6], color=GREY, lw=0.6)
    ax.plot([offs[k + 1], span], [1.2, 0.6], color=GREY, lw=0.6)
    ax.text(0, -0.45, f"class k={k}: LOR (sign s, i, j) at offset[k] + (s (n_y - a_y) + i)(n_z - a_z) + j,\n"
            f"c_u = (i + [s_y<0] a_y, j + [s_z<0] a_z), c_l = c_u + (s_y a_y, s_z a_z)", fontsize=8, va="top")
    ax.set_xlim(-0.02 * span, 1.02 * span)
    ax.set_ylim(-1.2, 2.4)
    ax.set_yticks([])
    ax.set_xlabel("index in the LOR vector")
    ax.set_title(f"(c) LOR data layout (class-major); sign order {SIGNS}", fontsize=9)
    fig.tight_layout()
    return _save(fig, outdir, "dualhead_geometry.png")


def main(outdir) -> list:
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    return [grid_figure(outdir), direct_figure(outdir), first_figure(outdir), dualhead_figure(outdir)]


if __name__ == "__main__":
    for p in main(sys.argv[1] if len(sys.argv) > 1 else "docs/_generated"):
        print(p)
