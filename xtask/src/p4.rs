//! `cargo xtask p4`: build, check, test and deploy the Tofino program in p4/.
//!
//! Compiling bolt.p4 needs Intel's P4 Studio SDE (bf-p4c, switchd, the Tofino model);
//! none of it can be installed from a package registry. Every subcommand says what it
//! needs and stops when it is missing, rather than doing half its job.

use std::env;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};

#[derive(Args, Debug)]
pub struct P4Args {
    #[command(subcommand)]
    pub command: P4Command,
}

#[derive(Subcommand, Debug)]
pub enum P4Command {
    /// Compile p4/bolt.p4 with the SDE's bf-p4c (or p4_build.sh) into target/p4/.
    Build(BuildArgs),
    /// Front-end check of p4/bolt.p4 with p4c's p4test against a tna.p4.
    Check(CheckArgs),
    /// Replay tests/vectors/p4 on the Tofino model with the SDE's PTF runner.
    Test(TestArgs),
    /// Copy the build and the control plane to a switch, start switchd, run the setup.
    Deploy(DeployArgs),
}

#[derive(Args, Debug, Clone)]
pub struct Geometry {
    /// log2 of the entries per priority level (14: 16 K, what fits a Tofino's register
    /// memory for four levels; p4/README.md "Resource budget").
    #[arg(long, default_value_t = 14)]
    pub index_bits: u8,
    /// log2 of the priority levels compiled in (2: four levels).
    #[arg(long, default_value_t = 2)]
    pub level_bits: u8,
}

#[derive(Args, Debug)]
pub struct BuildArgs {
    /// Compile for Tofino 2 (t2na) instead of Tofino (tna).
    #[arg(long)]
    pub tofino2: bool,
    #[command(flatten)]
    pub geometry: Geometry,
}

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// Directory holding tna.p4 (and tofino.p4 ...): the SDE's share/p4c/p4include, or
    /// backends/tofino/bf-p4c/p4include of the p4c sources. Default: $BOLT_TNA_INCLUDE,
    /// else $SDE's.
    #[arg(long)]
    pub tna_include: Option<PathBuf>,
    /// Check against t2na.p4 (Tofino 2) instead of tna.p4.
    #[arg(long)]
    pub tofino2: bool,
}

#[derive(Args, Debug)]
pub struct TestArgs {
    /// Test on Tofino 2's model.
    #[arg(long)]
    pub tofino2: bool,
}

#[derive(Args, Debug)]
pub struct DeployArgs {
    /// The switch, as ssh reaches it (user@host).
    #[arg(long)]
    pub switch: String,
    /// Control-plane configuration (see p4/control/bolt_switch.example.json).
    #[arg(long)]
    pub config: PathBuf,
    /// Where the files go on the switch.
    #[arg(long, default_value = "/opt/bolt")]
    pub remote_dir: String,
    /// The program was built for Tofino 2.
    #[arg(long)]
    pub tofino2: bool,
    /// Seconds to wait for switchd to load the program before running the setup.
    #[arg(long, default_value_t = 30)]
    pub switchd_wait: u64,
}

const PROGRAM: &str = "bolt";

pub fn run(args: P4Args) -> Result<()> {
    match args.command {
        P4Command::Build(a) => build(&a),
        P4Command::Check(a) => check(&a),
        P4Command::Test(a) => test(&a),
        P4Command::Deploy(a) => deploy(&a),
    }
}

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("xtask sits in the workspace").to_path_buf()
}

fn build_dir(tofino2: bool) -> PathBuf {
    workspace_root().join("target/p4").join(if tofino2 { "tofino2" } else { "tofino" }).join(PROGRAM)
}

/// The SDE root, or why it is needed.
fn sde(purpose: &str) -> Result<PathBuf> {
    match env::var_os("SDE") {
        Some(dir) if !dir.is_empty() => Ok(PathBuf::from(dir)),
        _ => bail!(
            "{purpose} needs Intel's P4 Studio SDE (bf-p4c, bf_switchd, the Tofino model), \
             which no package registry provides: install open-p4studio or the SDE, then set \
             SDE to its root (the directory with install/bin/bf-p4c and run_switchd.sh)"
        ),
    }
}

fn status(cmd: &mut Command) -> Result<()> {
    eprintln!("+ {cmd:?}");
    let st = cmd.status().with_context(|| format!("running {:?}", cmd.get_program()))?;
    if !st.success() {
        bail!("{:?} failed: {st}", cmd.get_program());
    }
    Ok(())
}

fn defines(g: &Geometry) -> Result<Vec<String>> {
    if !(1..=30).contains(&g.index_bits) || !(0..=3).contains(&g.level_bits) {
        bail!("--index-bits must be 1 to 30 and --level-bits 0 to 3 (at most 8 levels)");
    }
    Ok(vec![format!("-DQUEUE_INDEX_BITS={}", g.index_bits), format!("-DQUEUE_LEVEL_BITS={}", g.level_bits)])
}

fn build(a: &BuildArgs) -> Result<()> {
    let sde = sde("cargo xtask p4 build")?;
    let src = workspace_root().join("p4/bolt.p4");
    let out = build_dir(a.tofino2);
    std::fs::create_dir_all(&out)?;
    let defs = defines(&a.geometry)?;
    let (target, arch) = if a.tofino2 { ("tofino2", "t2na") } else { ("tofino", "tna") };
    let bf_p4c = sde.join("install/bin/bf-p4c");
    if bf_p4c.exists() {
        let mut cmd = Command::new(bf_p4c);
        cmd.args(["--std", "p4-16", "--target", target, "--arch", arch, "-g"])
            .arg("-o")
            .arg(&out)
            .arg("--bf-rt-schema")
            .arg(out.join("bf-rt.json"))
            .args(&defs)
            .arg(&src);
        status(&mut cmd)?;
    } else if sde.join("p4_build.sh").exists() {
        // The SDE's wrapper installs into $SDE_INSTALL, where run_switchd.sh -p finds it.
        let mut cmd = Command::new(sde.join("p4_build.sh"));
        cmd.arg(&src).arg(format!("P4PPFLAGS={}", defs.join(" ")));
        if a.tofino2 {
            cmd.arg("--with-tofino2");
        }
        status(cmd.env("SDE", &sde))?;
    } else {
        bail!("{} has neither install/bin/bf-p4c nor p4_build.sh: is SDE the SDE root?", sde.display());
    }
    eprintln!("built {} ({})", out.display(), defs.join(" "));
    Ok(())
}

fn find_on_path(name: &str) -> Option<PathBuf> {
    env::var_os("PATH").and_then(|p| env::split_paths(&p).map(|d| d.join(name)).find(|f| f.is_file()))
}

fn check(a: &CheckArgs) -> Result<()> {
    let Some(p4test) = find_on_path("p4test") else {
        bail!(
            "p4test (the p4c front end) is not on PATH: install p4c (p4lang-p4c or from source); \
             Debian 12 does not package it"
        );
    };
    let include = match (&a.tna_include, env::var_os("BOLT_TNA_INCLUDE")) {
        (Some(dir), _) => dir.clone(),
        (None, Some(dir)) if !dir.is_empty() => PathBuf::from(dir),
        _ => sde("finding tna.p4 without --tna-include")?.join("install/share/p4c/p4include"),
    };
    let arch = if a.tofino2 { "t2na.p4" } else { "tna.p4" };
    if !include.join(arch).is_file() {
        bail!(
            "{} has no {arch}: point --tna-include (or BOLT_TNA_INCLUDE) at the SDE's \
             share/p4c/p4include or at p4c's backends/tofino/bf-p4c/p4include",
            include.display()
        );
    }
    let mut cmd = Command::new(p4test);
    let mut inc = OsString::from("-I");
    inc.push(include.as_os_str());
    // tna.p4 and t2na.p4 stop at an #error unless the target is defined, as bf-p4c does.
    let target = if a.tofino2 { "-D__TARGET_TOFINO__=2" } else { "-D__TARGET_TOFINO__=1" };
    // `--validate` runs p4c's front end only (its passes include the def-use analysis that
    // warns of invalid-header reads and uninitialised out parameters); the mid end is
    // p4test's own and no Tofino compiler runs it.
    cmd.args(["--validate", "--std", "p4-16", target]).arg(inc).arg(workspace_root().join("p4/bolt.p4"));
    eprintln!("+ {cmd:?}");
    let out = cmd.output().with_context(|| format!("running {:?}", cmd.get_program()))?;
    let printed = String::from_utf8_lossy(&out.stderr);
    eprint!("{printed}{}", String::from_utf8_lossy(&out.stdout));
    // p4test exits 0 on warnings; the program is kept free of them (p4/README.md).
    let lines_with = |word: &str| printed.lines().filter(|l| l.contains(word)).count();
    let (errors, warnings) = (lines_with("error"), lines_with("warning"));
    if !out.status.success() || errors > 0 || warnings > 0 {
        bail!("p4test: {} ({errors} errors, {warnings} warnings)", out.status);
    }
    eprintln!("p4test: 0 errors, 0 warnings ({arch})");
    Ok(())
}

fn test(a: &TestArgs) -> Result<()> {
    let sde = sde("cargo xtask p4 test")?;
    let runner = sde.join("run_p4_tests.sh");
    if !runner.exists() {
        bail!("{} not found: is SDE the SDE root?", runner.display());
    }
    // The vectors' geometry: 8 entries per level, 4 levels.
    let vectors = BuildArgs { tofino2: a.tofino2, geometry: Geometry { index_bits: 3, level_bits: 2 } };
    build(&vectors)?;
    let mut cmd = Command::new(runner);
    cmd.args(["-p", PROGRAM, "-t"]).arg(workspace_root().join("p4/tests"));
    if a.tofino2 {
        cmd.args(["--arch", "tofino2"]);
    }
    status(cmd.env("SDE", &sde))
}

fn ssh(host: &str, script: &str) -> Result<()> {
    status(Command::new("ssh").arg(host).arg(format!("bash -lc {}", shell_quote(script))))
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

fn deploy(a: &DeployArgs) -> Result<()> {
    let out = build_dir(a.tofino2);
    let conf = out.join(format!("{PROGRAM}.conf"));
    if !conf.is_file() {
        bail!("{} is missing: run `cargo xtask p4 build` first (it needs the SDE)", conf.display());
    }
    if !a.config.is_file() {
        bail!("{}: no such configuration file", a.config.display());
    }
    let remote_build = format!("{}/{PROGRAM}", a.remote_dir);
    // bf-p4c writes absolute paths into the .conf; point them at the copy on the switch.
    let local = out.to_str().context("build directory is not UTF-8")?;
    let rewritten = std::fs::read_to_string(&conf)?.replace(local, &remote_build);
    let staged = out.with_extension("deploy.conf");
    std::fs::write(&staged, rewritten)?;

    ssh(&a.switch, &format!("mkdir -p {}", shell_quote(&a.remote_dir)))?;
    status(Command::new("scp").arg("-rq").arg(&out).arg(format!("{}:{}/", a.switch, a.remote_dir)))?;
    status(Command::new("scp").arg("-q").arg(&staged).arg(format!("{}:{remote_build}/{PROGRAM}.conf", a.switch)))?;
    status(
        Command::new("scp")
            .arg("-q")
            .arg(workspace_root().join("p4/control/setup.py"))
            .arg(&a.config)
            .arg(format!("{}:{}/", a.switch, a.remote_dir)),
    )?;
    let config_name = a.config.file_name().context("configuration path has no file name")?.to_string_lossy();
    // switchd runs in the background; the setup waits for it to load the program.
    let dir = &a.remote_dir;
    ssh(
        &a.switch,
        &format!(
            "cd \"$SDE\" && nohup ./run_switchd.sh -p {PROGRAM} -c {remote_build}/{PROGRAM}.conf \
             > {dir}/switchd.log 2>&1 < /dev/null & sleep {wait} && \
             BOLT_CONFIG={dir}/{config_name} \"$SDE\"/run_bfshell.sh -b {dir}/setup.py",
            wait = a.switchd_wait
        ),
    )
}
