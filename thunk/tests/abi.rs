//! The C ABI (the `hsakmt` crate, hsakmt) against Debian's libhsakmt-dev 5.2.3 headers and
//! the built library. It lives with the thunk so that `cargo test -p thunk --test abi` runs it;
//! `hsakmt` is a dev-dependency of `thunk` for it.
//!
//! * layouts: a C program compiled against `hsakmttypes.h` prints `sizeof`, and `offsetof` and
//!   the size of every member, of each struct the library's functions take; the Rust side must
//!   match member by member;
//! * bitfields: the same program sets each bitfield of the unions the library passes as `u32`
//!   (`HsaMemFlags`, `HSA_ENGINE_ID`, ...) to 1 and to all ones; the Rust accessors must produce the
//!   same words;
//! * symbols: `libhsakmt.so` has the soname `libhsakmt.so.1` and exports exactly the functions of
//!   `hsakmt.ver`, each `@@HSAKMT_1`, which are exactly the `hsaKmt*` functions Debian's
//!   libhsakmt.so.1 (5.2.3) exports, and among them every one ROCr's `libhsa-runtime64.so.1`
//!   imports.

use hsakmt::types::*;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use thunk::hsakmt::{AccessFailure, CacheType, Capability, EngineId, MemFlags, MemMapFlags};

/// One struct: its C name, Rust size and (member, offset, size) triples.
struct Layout {
    name: &'static str,
    size: usize,
    members: Vec<(&'static str, usize, usize)>,
}

fn member_size<T, F>(_: fn(T) -> F) -> usize {
    std::mem::size_of::<F>()
}

/// `layout!(Type { Member, Member = "c.path" })`: the Rust struct's members and the C member
/// each stands for (its own name unless given).
macro_rules! layout {
    ($t:ident { $($f:ident $(= $c:literal)?),* $(,)? }) => {
        Layout {
            name: stringify!($t),
            size: std::mem::size_of::<$t>(),
            members: vec![$({
                let c: &[&'static str] = &[$($c)?];
                (c.first().copied().unwrap_or(stringify!($f)), std::mem::offset_of!($t, $f), member_size(|s: $t| s.$f))
            }),*],
        }
    };
}

fn layouts() -> Vec<Layout> {
    vec![
        layout!(HsaVersionInfo { KernelInterfaceMajorVersion, KernelInterfaceMinorVersion }),
        layout!(HsaSystemProperties { NumNodes, PlatformOem, PlatformId, PlatformRev }),
        layout!(HsaNodeProperties {
            NumCPUCores,
            NumFComputeCores,
            NumMemoryBanks,
            NumCaches,
            NumIOLinks,
            CComputeIdLo,
            FComputeIdLo,
            Capability,
            MaxWavesPerSIMD,
            LDSSizeInKB,
            GDSSizeInKB,
            WaveFrontSize,
            NumShaderBanks,
            NumArrays,
            NumCUPerArray,
            NumSIMDPerCU,
            MaxSlotsScratchCU,
            EngineId,
            VendorId,
            DeviceId,
            LocationId,
            LocalMemSize,
            MaxEngineClockMhzFCompute,
            MaxEngineClockMhzCCompute,
            DrmRenderMinor,
            MarketingName,
            AMDName,
            uCodeEngineVersions,
            DebugProperties,
            HiveID,
            NumSdmaEngines,
            NumSdmaXgmiEngines,
            NumSdmaQueuesPerEngine,
            NumCpQueues,
            NumGws,
            Reserved2,
            Domain,
            UniqueID,
            VGPRSizePerCU,
            SGPRSizePerCU,
            Reserved,
        }),
        layout!(HsaMemoryProperties { HeapType, SizeInBytes, Flags, Width, MemoryClockMax, VirtualBaseAddress }),
        layout!(HsaCacheProperties {
            ProcessorIdLow,
            CacheLevel,
            CacheSize,
            CacheLineSize,
            CacheLinesPerTag,
            CacheAssociativity,
            CacheLatency,
            CacheType,
            SiblingMap,
        }),
        layout!(HsaIoLinkProperties {
            IoLinkType,
            VersionMajor,
            VersionMinor,
            NodeFrom,
            NodeTo,
            Weight,
            MinimumLatency,
            MaximumLatency,
            MinimumBandwidth,
            MaximumBandwidth,
            RecTransferSize,
            Flags,
        }),
        layout!(HsaClockCounters { GPUClockCounter, CPUClockCounter, SystemClockCounter, SystemClockFrequencyHz }),
        layout!(HsaQueueResource { QueueId, QueueDoorBell, QueueWptrValue, QueueRptrValue, ErrorReason }),
        layout!(HsaSyncVar { SyncVar, SyncVarSize }),
        layout!(HsaEventDescriptor { EventType, NodeId, SyncVar }),
        layout!(HsaMemoryAccessFault { NodeId, VirtualAddress, Failure, Flags }),
        layout!(HsaEventData { EventType, EventData, HWData1, HWData2, HWData3 }),
        layout!(HsaEvent { EventId, EventData }),
        layout!(HsaPointerInfo {
            Type,
            Node,
            MemFlags,
            CPUAddress,
            GPUAddress,
            SizeInBytes,
            NRegisteredNodes,
            NMappedNodes,
            RegisteredNodes,
            MappedNodes,
            UserData,
        }),
        layout!(HsaGpuTileConfig {
            TileConfig,
            MacroTileConfig,
            NumTileConfigs,
            NumMacroTileConfigs,
            GbAddrConfig,
            NumBanks,
            NumRanks,
            Reserved,
        }),
        layout!(HsaGraphicsResourceInfo { MemoryAddress, SizeInBytes, Metadata, MetadataSizeInBytes, Reserved }),
        layout!(HSA_SVM_ATTRIBUTE { r#type = "type", value }),
        layout!(HsaMemoryRange { MemoryAddress, SizeInBytes }),
        layout!(HsaDbgWaveMessage { MemoryVA, DbgWaveMsg }),
        layout!(HsaCounter { Type, CounterId, CounterSizeInBits, CounterMask, Flags, BlockIndex }),
        layout!(HsaCounterBlockProperties { BlockId, NumCounters, NumConcurrent, Counters }),
        layout!(HsaCounterProperties { NumBlocks, NumConcurrent, Blocks }),
        layout!(HsaPmcTraceRoot { TraceBufferMinSizeBytes, NumberOfPasses, TraceId }),
    ]
}

/// Types passed by value or behind plain pointers: (C type, Rust size).
fn scalars() -> Vec<(&'static str, usize)> {
    vec![
        ("HSAKMT_STATUS", std::mem::size_of::<HSAKMT_STATUS>()),
        ("HSA_QUEUEID", std::mem::size_of::<HSA_QUEUEID>()),
        ("HSA_QUEUE_TYPE", std::mem::size_of::<HSA_QUEUE_TYPE>()),
        ("HSA_QUEUE_PRIORITY", std::mem::size_of::<HSA_QUEUE_PRIORITY>()),
        ("HSA_EVENTTYPE", 4),
        ("HsaMemFlags", std::mem::size_of::<HsaMemFlags>()),
        ("HsaMemMapFlags", std::mem::size_of::<HsaMemMapFlags>()),
        ("HsaSharedMemoryHandle", std::mem::size_of::<HsaSharedMemoryHandle>()),
        ("HSA_ENGINE_ID", std::mem::size_of::<EngineId>()),
        ("HSA_CAPABILITY", std::mem::size_of::<Capability>()),
        ("HsaCacheType", std::mem::size_of::<CacheType>()),
        ("HsaAccessAttributeFailure", std::mem::size_of::<AccessFailure>()),
    ]
}

/// (C type, C member path, word with the member 1, word with the member all ones).
fn bitfields() -> Vec<(&'static str, &'static str, u32, u32)> {
    macro_rules! bits {
        ($c:literal, $rust:ident, [$($path:literal => $set:ident),* $(,)?]) => {
            vec![$(($c, $path, $rust(0).$set(1).0, $rust(0).$set(u32::MAX).0)),*]
        };
    }
    let mut v = bits!("HsaMemFlags", MemFlags, [
        "ui32.NonPaged" => with_non_paged,
        "ui32.CachePolicy" => with_cache_policy,
        "ui32.ReadOnly" => with_read_only,
        "ui32.PageSize" => with_page_size,
        "ui32.HostAccess" => with_host_access,
        "ui32.NoSubstitute" => with_no_substitute,
        "ui32.GDSMemory" => with_gds_memory,
        "ui32.Scratch" => with_scratch,
        "ui32.AtomicAccessFull" => with_atomic_access_full,
        "ui32.AtomicAccessPartial" => with_atomic_access_partial,
        "ui32.ExecuteAccess" => with_execute_access,
        "ui32.CoarseGrain" => with_coarse_grain,
        "ui32.AQLQueueMemory" => with_aql_queue_memory,
        "ui32.FixedAddress" => with_fixed_address,
        "ui32.NoNUMABind" => with_no_numa_bind,
        "ui32.Uncached" => with_uncached,
        "ui32.Reserved" => with_reserved,
    ]);
    v.extend(bits!("HsaMemMapFlags", MemMapFlags, [
        "ui32.CachePolicy" => with_cache_policy,
        "ui32.ReadOnly" => with_read_only,
        "ui32.PageSize" => with_page_size,
        "ui32.HostAccess" => with_host_access,
        "ui32.Migrate" => with_migrate,
        "ui32.Probe" => with_probe,
    ]));
    v.extend(bits!("HSA_ENGINE_ID", EngineId, [
        "ui32.uCode" => with_ucode,
        "ui32.Major" => with_major,
        "ui32.Minor" => with_minor,
        "ui32.Stepping" => with_stepping,
    ]));
    v.extend(bits!("HSA_CAPABILITY", Capability, [
        "ui32.HotPluggable" => with_hot_pluggable,
        "ui32.HSAMMUPresent" => with_hsammu_present,
        "ui32.SharedWithGraphics" => with_shared_with_graphics,
        "ui32.QueueSizePowerOfTwo" => with_queue_size_pow2,
        "ui32.QueueSize32bit" => with_queue_size_32bit,
        "ui32.QueueIdleEvent" => with_queue_idle_event,
        "ui32.VALimit" => with_va_limit,
        "ui32.WatchPointsSupported" => with_watch_points_supported,
        "ui32.WatchPointsTotalBits" => with_watch_points_total_bits,
        "ui32.DoorbellType" => with_doorbell_type,
        "ui32.AQLQueueDoubleMap" => with_aql_queue_double_map,
        "ui32.DebugTrapSupported" => with_debug_trap_supported,
        "ui32.SVMAPISupported" => with_svm_api_supported,
        "ui32.CoherentHostAccess" => with_coherent_host_access,
    ]));
    v.extend(bits!("HsaCacheType", CacheType, [
        "ui32.Data" => with_data,
        "ui32.Instruction" => with_instruction,
        "ui32.CPU" => with_cpu,
        "ui32.HSACU" => with_hsacu,
    ]));
    v.extend(bits!("HsaAccessAttributeFailure", AccessFailure, [
        "NotPresent" => with_not_present,
        "ReadOnly" => with_read_only,
        "NoExecute" => with_no_execute,
        "GpuAccess" => with_gpu_access,
        "ECC" => with_ecc,
        "Imprecise" => with_imprecise,
        "ErrorType" => with_error_type,
    ]));
    v
}

fn c_program() -> String {
    let mut c = String::from(
        "#include <stdint.h>\n#include <stdbool.h>\n#include <stddef.h>\n#include <stdio.h>\n#include <string.h>\n\
         #include <hsakmttypes.h>\nint main(void) {\n",
    );
    for l in layouts() {
        let _ = writeln!(c, "  printf(\"size {0} %zu\\n\", sizeof({0}));", l.name);
        for (m, _, _) in &l.members {
            let _ = writeln!(
                c,
                "  printf(\"member {0}.{1} %zu %zu\\n\", offsetof({0}, {1}), sizeof((({0} *)0)->{1}));",
                l.name, m
            );
        }
    }
    for (t, _) in scalars() {
        let _ = writeln!(c, "  printf(\"size {t} %zu\\n\", sizeof({t}));");
    }
    for (t, path, _, _) in bitfields() {
        for (tag, value) in [("one", "1"), ("ones", "~0u")] {
            let _ = writeln!(
                c,
                "  {{ {t} f; uint32_t w; memset(&f, 0, sizeof f); f.{path} = {value}; memcpy(&w, &f, 4); \
                 printf(\"bits {t}.{path}.{tag} %u\\n\", w); }}"
            );
        }
    }
    c.push_str("  return 0;\n}\n");
    c
}

fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hsakmt-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// What the C program prints, as `key -> values`.
fn c_answers() -> BTreeMap<String, Vec<usize>> {
    assert!(Path::new("/usr/include/hsakmttypes.h").exists(), "hsakmttypes.h missing: apt-get install libhsakmt-dev");
    let dir = scratch_dir("abi");
    let src = dir.join("layout.c");
    std::fs::write(&src, c_program()).unwrap();
    let exe = dir.join("layout");
    let out = Command::new("cc").arg("-Wall").arg("-o").arg(&exe).arg(&src).output().expect("cc runs");
    assert!(out.status.success(), "cc failed:\n{}", String::from_utf8_lossy(&out.stderr));
    let out = Command::new(&exe).output().unwrap();
    assert!(out.status.success());
    let _ = std::fs::remove_dir_all(&dir);
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let mut w = l.split_whitespace();
            let kind = w.next().unwrap();
            let key = format!("{kind} {}", w.next().unwrap());
            (key, w.map(|v| v.parse().unwrap()).collect())
        })
        .collect()
}

#[test]
fn structs_match_hsakmttypes_h() {
    let c = c_answers();
    let mut errors = Vec::new();
    let mut compared = 0;
    for l in layouts() {
        if c[&format!("size {}", l.name)] != [l.size] {
            errors.push(format!("sizeof {}: C {:?}, Rust {}", l.name, c[&format!("size {}", l.name)], l.size));
        }
        for (m, off, size) in &l.members {
            let got = &c[&format!("member {}.{m}", l.name)];
            if got != &[*off, *size] {
                errors.push(format!("{}.{m}: C offset/size {got:?}, Rust [{off}, {size}]", l.name));
            }
            compared += 1;
        }
    }
    for (t, size) in scalars() {
        if c[&format!("size {t}")] != [size] {
            errors.push(format!("sizeof {t}: C {:?}, Rust {size}", c[&format!("size {t}")]));
        }
    }
    for (t, path, one, ones) in bitfields() {
        for (tag, rust) in [("one", one), ("ones", ones)] {
            let got = c[&format!("bits {t}.{path}.{tag}")][0];
            if got != rust as usize {
                errors.push(format!("{t}.{path} set to {tag}: C {got:#x}, Rust {rust:#x}"));
            }
        }
    }
    assert!(errors.is_empty(), "{} mismatches:\n{}", errors.len(), errors.join("\n"));
    assert!(compared >= 145, "compared only {compared} members");
}

/// The names of `hsakmt.ver`'s HSAKMT_1 node.
fn version_script_names() -> BTreeSet<String> {
    hsakmt::VERSION_SCRIPT
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("hsaKmt"))
        .map(|l| l.trim_end_matches(';').to_string())
        .collect()
}

fn library() -> PathBuf {
    let profile = cuse_kfd_run::stage::profile_dir().unwrap();
    let hsakmt = cuse_kfd_run::stage::HSAKMT;
    cuse_kfd_run::stage::build(&profile, &[&hsakmt]).unwrap();
    hsakmt.built(&profile).unwrap()
}

fn tool(name: &str, args: &[&str], file: &Path) -> String {
    let out = Command::new(name).args(args).arg(file).output().unwrap_or_else(|e| panic!("{name}: {e}"));
    assert!(out.status.success(), "{name} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_library_exports_exactly_the_hsakmt_1_symbols() {
    let so = library();
    let dynamic = tool("readelf", &["-d"], &so);
    assert!(dynamic.contains("Library soname: [libhsakmt.so.1]"), "{dynamic}");
    let names = version_script_names();
    assert_eq!(names.len(), 67);
    let mut exported = BTreeSet::new();
    for line in tool("nm", &["-D", "--defined-only"], &so).lines() {
        let sym = line.split_whitespace().last().unwrap();
        let (name, version) = sym.split_once("@@").unwrap_or((sym, ""));
        assert_eq!(version, "HSAKMT_1", "{sym} is not versioned HSAKMT_1");
        assert!(line.contains(" T "), "{line}: not a function in .text");
        exported.insert(name.to_string());
    }
    assert_eq!(exported, names);

    // Debian's libhsakmt 5.2.3 (libhsakmt1): the same hsaKmt* functions, no more, no fewer.
    let debian = Path::new(DEBIAN_LIBHSAKMT);
    assert!(debian.exists(), "{DEBIAN_LIBHSAKMT} missing: apt-get install libhsakmt1");
    let theirs: BTreeSet<String> = tool("nm", &["-D", "--defined-only"], debian)
        .lines()
        .filter_map(|l| l.split_whitespace().last())
        .filter(|s| s.starts_with("hsaKmt"))
        .map(|s| {
            let (name, version) = s.split_once('@').unwrap_or((s, ""));
            assert_eq!(version, "@HSAKMT_1", "Debian's {name} is versioned {version}");
            name.to_string()
        })
        .collect();
    assert_eq!(theirs.len(), 67, "Debian's libhsakmt 5.2.3 exports 67 hsaKmt* functions");
    let missing: Vec<_> = theirs.difference(&exported).collect();
    let extra: Vec<_> = exported.difference(&theirs).collect();
    assert!(missing.is_empty() && extra.is_empty(), "missing from ours: {missing:?}; ours only: {extra:?}");

    // ROCr's imports, where the runtime is installed: all of them are there.
    let rocr = Path::new("/usr/lib/x86_64-linux-gnu/libhsa-runtime64.so.1");
    if rocr.exists() {
        let imports: BTreeSet<String> = tool("nm", &["-D", "--undefined-only"], rocr)
            .lines()
            .filter_map(|l| l.split_whitespace().last())
            .filter(|s| s.starts_with("hsaKmt"))
            .map(|s| s.split('@').next().unwrap().to_string())
            .collect();
        assert_eq!(imports.len(), 42, "ROCr 5.2.3 imports 42 hsaKmt* functions");
        let unmet: Vec<_> = imports.difference(&exported).collect();
        assert!(unmet.is_empty(), "ROCr imports what the library lacks: {unmet:?}");
    }
}

/// Debian's libhsakmt.so.1, the library ours stands in for.
const DEBIAN_LIBHSAKMT: &str = "/usr/lib/x86_64-linux-gnu/libhsakmt.so.1";
