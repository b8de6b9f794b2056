import PushFleetCore
import Testing

@Suite struct APNsEnvironmentTests {
    @Test func eachValueIsParsedFromItsSpelling() throws {
        for environment in APNsEnvironment.allCases {
            #expect(try APNsEnvironment(parsing: environment.rawValue, name: "--environment") == environment)
        }
        for deliveryProtocol in DeliveryProtocol.allCases {
            #expect(try DeliveryProtocol(parsing: deliveryProtocol.rawValue, name: "--protocol") == deliveryProtocol)
        }
    }

    @Test func anotherSpellingIsRefusedWithTheValuesItMayTake() {
        for (text, name, message) in [
            ("staging", "--environment", "--environment is production or sandbox"),
            ("Production", "\"environment\"", "\"environment\" is production or sandbox"),
            ("", "--environment", "--environment is production or sandbox"),
        ] {
            #expect(throws: InvalidChoice(name: name, value: text, choices: ["production", "sandbox"])) {
                try APNsEnvironment(parsing: text, name: name)
            }
            #expect(InvalidChoice(name: name, value: text, choices: ["production", "sandbox"]).description == message)
        }
        #expect(throws: InvalidChoice(name: "--protocol", value: "http3", choices: ["http2", "binary"])) {
            try DeliveryProtocol(parsing: "http3", name: "--protocol")
        }
        #expect(InvalidChoice(name: "x", value: "d", choices: ["a", "b", "c"]).description == "x is a, b or c")
    }

    @Test func eachEnvironmentHasApplesHosts() {
        #expect(APNsEnvironment.production.http2Host == "api.push.apple.com")
        #expect(APNsEnvironment.sandbox.http2Host == "api.sandbox.push.apple.com")
        #expect(APNsEnvironment.production.binaryHost == "gateway.push.apple.com")
        #expect(APNsEnvironment.sandbox.binaryHost == "gateway.sandbox.push.apple.com")
    }
}
