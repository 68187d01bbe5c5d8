/**
 * The railfence image on the test cluster's node: built by the project's image script
 * (deploy/image/build.sh: docker where an engine runs, otherwise podman offline), saved as an
 * archive and imported into the node's containerd (namespace k8s.io, where the kubelet looks). There is no registry: the chart
 * runs it with imagePullPolicy Never, so a missing image fails loudly instead of pulling.
 * RAILFENCE_IMAGE_ARCHIVE=<oci archive> imports an image built elsewhere instead.
 */
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { root, runScript, type ClusterInfo } from "./kube.js";

export interface ImageRef {
  repository: string;
  tag: string;
  /** A second tag of the same image, for the rolling upgrade. */
  upgradeTag: string;
  sizeMb: number;
}

export const IMAGE_REPOSITORY = "localhost/railfence";

export async function buildAndImportImage(info: ClusterInfo, log: (line: string) => void): Promise<ImageRef> {
  const work = mkdtempSync(join(tmpdir(), "railfence-image-"));
  try {
    let archive = process.env.RAILFENCE_IMAGE_ARCHIVE;
    if (!archive) {
      const script = join(root, "deploy", "image", "build.sh");
      if (!existsSync(script)) throw new Error("deploy/image/build.sh is missing: build the image elsewhere and set RAILFENCE_IMAGE_ARCHIVE");
      // build.sh tags by commit (and checkout, for a modified tree) and ends with a JSON line.
      const r = await runScript(script, [], {}, (l) => log(`  ${l}`));
      if (r.status !== 0) throw new Error(`deploy/image/build.sh exited ${r.status}`);
      const built = JSON.parse(r.stdout.trim().split("\n").pop() ?? "{}") as { image: string; engine?: string; sizeBytes?: number; buildSeconds?: number };
      const tagged = built.image;
      log(`  image ${tagged}: ${Math.round((built.sizeBytes ?? 0) / 1e6)} MB, built in ${built.buildSeconds} s by ${built.engine}`);
      archive = join(work, "railfence.tar");
      // podman: an OCI archive; docker: its own archive format, which containerd imports as well.
      const save = built.engine === "docker" ? ["docker", "save", "-o", archive, tagged] : ["podman", "save", "--format", "oci-archive", "-o", archive, tagged];
      execFileSync(save[0]!, save.slice(1), { stdio: "ignore" });
    }
    const ctr = (args: string[]) => execFileSync("ctr", ["--address", info.containerdAddress, "-n", "k8s.io", ...args], { encoding: "utf8" });
    const before = new Set(ctr(["images", "ls", "-q"]).split("\n").filter(Boolean));
    const out = ctr(["images", "import", archive]);
    const imported = [...out.matchAll(/unpacking (\S+) \(sha256:/g)].map((m) => m[1]!);
    const name =
      imported[0] ??
      ctr(["images", "ls", "-q"])
        .split("\n")
        .find((n) => n && !before.has(n));
    if (!name) throw new Error(`no image name in the archive (ctr said: ${out.trim()})`);
    const tag = name.includes(":") ? name.slice(name.lastIndexOf(":") + 1) : "latest";
    const upgradeTag = `${tag}-upgrade`;
    for (const t of [tag, upgradeTag]) {
      const target = `${IMAGE_REPOSITORY}:${t}`;
      if (target !== name)
        spawnSync("ctr", ["--address", info.containerdAddress, "-n", "k8s.io", "images", "tag", "--force", name, target], { stdio: "ignore" });
    }
    const present = ctr(["images", "ls", "-q"]);
    for (const t of [tag, upgradeTag])
      if (!present.includes(`${IMAGE_REPOSITORY}:${t}`)) throw new Error(`${IMAGE_REPOSITORY}:${t} not in containerd after the import`);
    return { repository: IMAGE_REPOSITORY, tag, upgradeTag, sizeMb: Math.round(statSync(archive).size / 1e6) };
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
