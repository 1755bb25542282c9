import Foundation
import RegistryFeed
import SessionMergerCore

/// What the daily report needs of a site: its zone and its shifts over time.
package enum SiteShiftLookup: Sendable, Hashable {
    case found(ShiftSchedule)
    /// The registry has no such site.
    case unknownSite
    /// The site has no (readable) shift settings.
    case noShift
    /// The registry feed has not been read up to date yet.
    case notReady
}

/// Where the merger learns sites' shifts.
package protocol SiteShiftProvider: Sendable {
    func shift(siteId: String) -> SiteShiftLookup
}

/// Shifts from the registry's change feed (`registry.changes`), as the `RegistryCacheLoader` keeps
/// them in a `RegistryCache`.
package struct RegistryCacheShiftProvider: SiteShiftProvider {
    let cache: RegistryCache
    let isReady: @Sendable () -> Bool

    package func shift(siteId: String) -> SiteShiftLookup {
        guard let site = cache.site(id: siteId) else { return isReady() ? .unknownSite : .notReady }
        guard let shift = site.shift else { return .noShift }
        return .found(ShiftSchedule(timezone: site.timezone, current: shift, earlier: site.shiftHistory))
    }
}

extension RegistryCacheShiftProvider {
    package init(loader: RegistryCacheLoader) {
        self.init(cache: loader.cache, isReady: { loader.isCaughtUp })
    }
}
