//! Memory management, one module per kernel file (mm/).

pub mod access_notifier;
pub mod cow;
pub mod fault_race;
pub mod gup;
pub mod huge_memory;
pub mod kswapd;
pub mod memory;
pub mod memory_tiers;
pub mod mempolicy;
pub mod migrate;
pub mod migrate_syscall;
pub mod migration_entry;
pub mod mmu_notifier;
pub mod mprotect;
pub mod page_alloc;
pub mod pgtable;
pub mod rmap;
pub mod shmem;
pub mod swap;
pub mod types;
pub mod vmscan;
