//! Steps 1 and 2: the runtime over the device (hsa_init), its agents and memory pools as
//! hsa_agent_get_info / hsa_amd_memory_pool_get_info answer them, and a queue on the GPU
//! created after ROCr's size rules were shown to hold.

use crate::report::{check, check_eq, note, Context, Result};
use rocr_shim::hsa::*;
use rocr_shim::{Agent, Config, Info, Pool, Queue, Runtime, Status};

fn info_u64(rt: &Runtime, agent: Agent, attr: u32) -> Result<u64> {
    let v = rt.agent_info(agent, attr).context("hsa_agent_get_info")?;
    v.as_u64().ok_or_else(|| format!("agent attribute {attr:#x} is not a number: {v:?}"))
}

fn info_text(rt: &Runtime, agent: Agent, attr: u32) -> Result<String> {
    let v = rt.agent_info(agent, attr).context("hsa_agent_get_info")?;
    v.as_text().ok_or_else(|| format!("agent attribute {attr:#x} is not text: {v:?}"))
}

fn pool_u64(rt: &Runtime, pool: Pool, attr: u32) -> Result<u64> {
    let v = rt.pool_info(pool, attr).context("hsa_amd_memory_pool_get_info")?;
    v.as_u64().ok_or_else(|| format!("pool attribute {attr:#x} is not a number: {v:?}"))
}

fn describe_pool(rt: &Runtime, pool: Pool) -> Result<String> {
    let flags = pool_u64(rt, pool, HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS)? as u32;
    let mut kind = Vec::new();
    for (bit, name) in [
        (HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED, "fine-grained"),
        (HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED, "coarse-grained"),
        (HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT, "kernarg"),
    ] {
        if flags & bit != 0 {
            kind.push(name);
        }
    }
    if rt.pool_info(pool, HSA_AMD_MEMORY_POOL_INFO_SIGNAL_CAPABLE).context("SIGNAL_CAPABLE")? == Info::Bool(true) {
        kind.push("SIGNAL_CAPABLE");
    }
    let size = pool_u64(rt, pool, HSA_AMD_MEMORY_POOL_INFO_SIZE)?;
    let granule = pool_u64(rt, pool, HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_GRANULE)?;
    Ok(format!("pool {:#x}: {} MiB, granule {granule} B, {}", pool.0, size >> 20, kind.join(", ")))
}

/// hsa_init: the runtime over `kfd`; prints and checks the agents and their pools.
pub fn init(kfd: thunk::Kfd) -> Result<(Runtime, Agent, Agent)> {
    // The switches of the C library's hsa_init (CUSE_KFD_SHIM_*) apply here too.
    let rt = Runtime::new(Config { kfd: Some(kfd), ..Config::from_env() }).context("hsa_init")?;
    let major = rt.system_info(HSA_SYSTEM_INFO_VERSION_MAJOR).context("hsa_system_get_info")?;
    let minor = rt.system_info(HSA_SYSTEM_INFO_VERSION_MINOR).context("hsa_system_get_info")?;
    let hz = rt.system_info(HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY).context("hsa_system_get_info")?;
    let (major, minor, hz) = (major.as_u64().unwrap_or(0), minor.as_u64().unwrap_or(0), hz.as_u64().unwrap_or(0));
    note(format!("HSA {major}.{minor}, system timestamps at {hz} Hz"));
    check(major == 1 && hz > 0, "hsa_system_get_info: HSA 1.x with a running system clock")?;

    for agent in rt.agents() {
        let device = info_u64(&rt, agent, HSA_AGENT_INFO_DEVICE)? as u32;
        let name = info_text(&rt, agent, HSA_AGENT_INFO_NAME)?;
        let node = info_u64(&rt, agent, HSA_AGENT_INFO_NODE)?;
        if device == HSA_DEVICE_TYPE_GPU {
            let min = info_u64(&rt, agent, HSA_AGENT_INFO_QUEUE_MIN_SIZE)?;
            let max = info_u64(&rt, agent, HSA_AGENT_INFO_QUEUE_MAX_SIZE)?;
            let queues = info_u64(&rt, agent, HSA_AGENT_INFO_QUEUES_MAX)?;
            let cus = info_u64(&rt, agent, HSA_AMD_AGENT_INFO_COMPUTE_UNIT_COUNT)?;
            let product = info_text(&rt, agent, HSA_AMD_AGENT_INFO_PRODUCT_NAME)?;
            note(format!(
                "GPU agent {name} ({product}), node {node}, {cus} CUs, queues {min}..{max} packets, at most {queues}"
            ));
        } else {
            note(format!("CPU agent {name}, node {node}"));
        }
        for pool in rt.pools(agent).context("hsa_amd_agent_iterate_memory_pools")? {
            note(format!("  {}", describe_pool(&rt, pool)?));
        }
    }

    let cpu = rt.cpu_agent().ok_or("the runtime has no CPU agent")?;
    let gpus = rt.gpu_agents();
    check_eq(gpus.len(), 1, "one GPU agent (the device was made with one GPU)")?;
    let gpu = gpus[0];
    check(rt.agents().first() == Some(&cpu), "the CPU agent comes first, as ROCr enumerates them")?;
    check(
        info_u64(&rt, gpu, HSA_AGENT_INFO_FEATURE)? == u64::from(HSA_AGENT_FEATURE_KERNEL_DISPATCH)
            && info_u64(&rt, cpu, HSA_AGENT_INFO_FEATURE)? == u64::from(HSA_AGENT_FEATURE_AGENT_DISPATCH),
        "the GPU takes kernel dispatches, the CPU agent dispatches only",
    )?;
    let (cpu_node, gpu_node) = (info_u64(&rt, cpu, HSA_AGENT_INFO_NODE)?, info_u64(&rt, gpu, HSA_AGENT_INFO_NODE)?);
    check(
        cpu_node != gpu_node && info_u64(&rt, gpu, HSA_AMD_AGENT_INFO_DRIVER_NODE_ID)? == gpu_node,
        "each agent is its own topology node, the driver's node id",
    )?;
    let (min, max) =
        (info_u64(&rt, gpu, HSA_AGENT_INFO_QUEUE_MIN_SIZE)?, info_u64(&rt, gpu, HSA_AGENT_INFO_QUEUE_MAX_SIZE)?);
    check(
        min.is_power_of_two() && max.is_power_of_two() && min <= max,
        "GPU queue sizes are powers of two, min <= max",
    )?;

    let vram = rt.vram_pool(gpu).context("the GPU's VRAM pool")?;
    let signal_pool = rt.signal_pool(gpu);
    let capable = rt.pool_info(vram, HSA_AMD_MEMORY_POOL_INFO_SIGNAL_CAPABLE).context("SIGNAL_CAPABLE")?;
    if std::env::var("CUSE_KFD_SHIM_DEVICE_SIGNALS").is_ok_and(|v| v == "0") {
        check(signal_pool.is_none(), "no SIGNAL_CAPABLE pool (CUSE_KFD_SHIM_DEVICE_SIGNALS=0)")?;
    } else {
        check(
            signal_pool == Some(vram) && capable == Info::Bool(true),
            "the GPU's VRAM pool is SIGNAL_CAPABLE (where batches of signals can live)",
        )?;
    }
    let system = rt.system_pool().context("the CPU's system pool")?;
    let flags = pool_u64(&rt, system, HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS)? as u32;
    let wanted = HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED | HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT;
    check(flags & wanted == wanted, "the CPU's system pool is fine-grained and takes kernel arguments")?;
    let isa = rt.agent_info(gpu, HSA_AGENT_INFO_ISA).err().map(|e| e.status);
    check_eq(isa, Some(Status::INVALID_ARGUMENT), "HSA_AGENT_INFO_ISA is refused: no code-object loader")?;
    Ok((rt, cpu, gpu))
}

/// hsa_queue_create on the GPU: sizes ROCr refuses are refused with ROCr's statuses, then a
/// queue of 256 packets.
pub fn queue(rt: &Runtime, cpu: Agent, gpu: Agent) -> Result<Queue> {
    let min = info_u64(rt, gpu, HSA_AGENT_INFO_QUEUE_MIN_SIZE)? as u32;
    let max = info_u64(rt, gpu, HSA_AGENT_INFO_QUEUE_MAX_SIZE)? as u32;
    let refused = |agent: Agent, size: u32| rt.create_queue(agent, size, None).err().map(|e| e.status);
    let cases = [
        (gpu, min + min / 2, Status::INVALID_ARGUMENT, "not a power of two"),
        (gpu, min / 2, Status::INVALID_ARGUMENT, "below the minimum"),
        (gpu, max * 2, Status::OUT_OF_RESOURCES, "above the maximum"),
    ];
    for (agent, size, status, why) in cases {
        check_eq(refused(agent, size), Some(status), &format!("{size} packets {why}: {status}"))?;
    }
    match refused(cpu, min) {
        Some(status) => check(true, &format!("no queue on the CPU agent: {status}"))?,
        None => check(false, "no queue on the CPU agent")?,
    }
    let q = rt.create_queue(gpu, 256, None).context("hsa_queue_create(GPU, 256)")?;
    let s = q.state();
    note(format!(
        "queue {} at {:#x}: {} packets, doorbell signal {:#x}, read index {}",
        s.id,
        q.address(),
        s.size(),
        s.doorbell_signal,
        s.read_index()
    ));
    check(s.size() == 256 && s.read_index() == 0, "256 packets, nothing consumed yet")?;
    check_eq(rt.counters().live_queues, 1, "only the good request made a queue")?;
    Ok(q)
}
