import Foundation
import PushFleetServices

// The JSON bodies `pushfleet api` answers with, other than those of PushFleetServices (the status
// objects, a campaign launched); each is written by ``PushFleetJSON/encode(_:)``.

/// `POST /v1/notify`: the notification's id, the devices it goes to, whether it was created now,
/// and where to follow it.
struct NotifyAnswer: Encodable {
    let id: String
    let devices: Int
    let created: Bool
    let href: String

    init(_ result: Notifier.Result) {
        self.id = result.id.uuidString.lowercased()
        self.devices = result.devices
        self.created = result.created
        self.href = "/v1/notifications/\(self.id)"
    }
}

/// `PUT /v1/devices/{token}`: the device's status and owner, and the owner it had before when this
/// registration moved it to another (`null` otherwise).
struct DeviceAnswer: Encodable {
    let token: String
    let status: String
    let owner: String
    let previousOwner: String?

    enum CodingKeys: String, CodingKey {
        case token, status, owner
        case previousOwner = "previous_owner"
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(self.token, forKey: .token)
        try container.encode(self.status, forKey: .status)
        try container.encode(self.owner, forKey: .owner)
        try container.encode(self.previousOwner, forKey: .previousOwner)
    }
}

/// `PUT /v1/groups/{id}/members`: the group and its members now, in order.
struct GroupAnswer: Encodable {
    let group: String
    let users: [String]
}
