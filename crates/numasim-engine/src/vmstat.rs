//! Event counters under their /proc/vmstat names (include/linux/vm_event_item.h, mm/vmstat.c).

macro_rules! vm_events {
    ($( $id:ident = $name:literal ),* $(,)?) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        #[repr(usize)]
        pub enum VmEvent { $( $id ),* }
        pub const VM_EVENT_NAMES: &[&str] = &[ $( $name ),* ];
    };
}

vm_events! {
    NumaPteUpdates = "numa_pte_updates",
    NumaHugePteUpdates = "numa_huge_pte_updates",
    NumaHintFaults = "numa_hint_faults",
    NumaHintFaultsLocal = "numa_hint_faults_local",
    NumaPagesMigrated = "numa_pages_migrated",
    PgmigrateSuccess = "pgmigrate_success",
    PgmigrateFail = "pgmigrate_fail",
    ThpFaultAlloc = "thp_fault_alloc",
    ThpFaultFallback = "thp_fault_fallback",
    ThpMigrationSuccess = "thp_migration_success",
    ThpMigrationFail = "thp_migration_fail",
    ThpMigrationSplit = "thp_migration_split",
    ThpSplitPage = "thp_split_page",
    NumaHit = "numa_hit",
    NumaMiss = "numa_miss",
    NumaForeign = "numa_foreign",
    NumaInterleave = "numa_interleave",
    NumaLocal = "numa_local",
    NumaOther = "numa_other",
    Pgfault = "pgfault",
    Pgmajfault = "pgmajfault",
    Pgalloc = "pgalloc_normal",
    Pgfree = "pgfree",
    NrTlbRemoteFlush = "nr_tlb_remote_flush",
    NrTlbRemoteFlushReceived = "nr_tlb_remote_flush_received",
    NrTlbLocalFlushAll = "nr_tlb_local_flush_all",
    NrTlbLocalFlushOne = "nr_tlb_local_flush_one",
    PgpromoteSuccess = "pgpromote_success",
    PgpromoteCandidate = "pgpromote_candidate",
    PgpromoteCandidateNrl = "pgpromote_candidate_nrl",
    PgdemoteKswapd = "pgdemote_kswapd",
    PgdemoteDirect = "pgdemote_direct",
}

pub const NR_VM_EVENTS: usize = VM_EVENT_NAMES.len();

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmStat(pub [u64; NR_VM_EVENTS]);

impl Default for VmStat {
    fn default() -> Self {
        VmStat([0; NR_VM_EVENTS])
    }
}

impl VmStat {
    #[inline]
    pub fn count(&mut self, e: VmEvent, n: u64) {
        self.0[e as usize] += n;
    }
    pub fn get(&self, e: VmEvent) -> u64 {
        self.0[e as usize]
    }
}
