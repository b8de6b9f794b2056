/// The OpenAPI 3.1 description of `pushfleet api`, served at `GET /openapi.json`. Written by hand
/// beside the routes; `APITests` checks that every route is described and every described path
/// is routed.
enum OpenAPIDocument {
    static let json = #"""
    {
      "openapi": "3.1.0",
      "info": {
        "title": "PushFleet API",
        "version": "1",
        "description": "Notifications now (the doorbell lane), devices and groups, and campaigns. Every /v1 call needs `authorization: Bearer pf_<id>_<secret>` (pushfleet api-key create); a key acts on its topics only. Errors are {\"error\":{\"message\":\"…\"}}."
      },
      "components": {
        "securitySchemes": { "apiKey": { "type": "http", "scheme": "bearer" } },
        "schemas": {
          "Error": { "type": "object", "properties": { "error": { "type": "object", "properties": { "message": { "type": "string" } } } } },
          "Headers": {
            "type": "object",
            "required": ["topic"],
            "properties": {
              "id": { "type": "string", "format": "uuid", "description": "Sending the same id again sends nothing more." },
              "topic": { "type": "string" },
              "environment": { "type": "string", "enum": ["production", "sandbox"], "default": "production" },
              "payload": { "type": "object", "description": "The APNs payload; at most 4,096 bytes compact (5,120 for voip). Required, but for a campaign with variants (each has its own)." },
              "push_type": { "type": "string", "default": "alert" },
              "priority": { "type": "integer", "enum": [10, 5, 1], "default": 10 },
              "expiration": { "type": "integer", "default": 0 },
              "collapse_id": { "type": "string", "maxLength": 64 }
            }
          },
          "Notify": {
            "allOf": [
              { "$ref": "#/components/schemas/Headers" },
              {
                "type": "object",
                "description": "Exactly one of user, group, tokens.",
                "properties": {
                  "user": { "type": "string" },
                  "group": { "type": "string" },
                  "tokens": { "type": "array", "items": { "type": "string", "description": "hex" }, "maxItems": 10000 }
                }
              }
            ]
          },
          "NewCampaign": {
            "allOf": [
              { "$ref": "#/components/schemas/Headers" },
              {
                "type": "object",
                "description": "Exactly one of tokens, recipients, from_registry.",
                "properties": {
                  "tokens": { "type": "array", "items": { "type": "string", "description": "hex" } },
                  "recipients": {
                    "type": "array", "description": "tokens with the fields localized and local_time read, and those a payload template's placeholders name ({{first_name}}: strings or numbers)",
                    "items": {
                      "type": "object", "required": ["token"],
                      "properties": { "token": { "type": "string" }, "locale": { "type": "string" }, "time_zone": { "type": "string", "description": "IANA, such as Europe/Paris" } },
                      "additionalProperties": { "type": ["string", "number", "null"] }
                    }
                  },
                  "from_registry": { "type": "boolean" },
                  "shard_size": { "type": "integer", "minimum": 1, "maximum": 100000, "default": 1000 },
                  "rate": { "type": "integer", "minimum": 1, "description": "notifications per second, fleet-wide; absent: as fast as the fleet can" },
                  "at": { "type": "string", "format": "date-time", "description": "when it starts (state scheduled until then); absent: at once" },
                  "variants": {
                    "type": "array", "minItems": 2, "maxItems": 26,
                    "description": "a split test instead of one payload: each recipient gets one variant, in proportion to the weights; GET of the returned id shows them side by side",
                    "items": {
                      "type": "object", "required": ["name", "payload", "weight"],
                      "properties": { "name": { "type": "string" }, "payload": { "type": "object" }, "weight": { "type": "integer", "minimum": 1 } }
                    }
                  },
                  "localized": {
                    "type": "object", "additionalProperties": { "type": "object" },
                    "description": "a payload per locale (fr, pt-BR); a recipient gets its locale's (fr_CA, then fr), else payload"
                  },
                  "local_time": { "type": "string", "pattern": "^[0-2][0-9]:[0-5][0-9]$", "description": "HH:MM: each recipient's start at the next such time of its own time zone; not with at" },
                  "default_zone": { "type": "string", "description": "the time zone of recipients without one (with local_time)" }
                }
              }
            ]
          },
          "DeviceOutcome": {
            "type": "object",
            "properties": {
              "token": { "type": "string" },
              "user": { "type": ["string", "null"] },
              "status": { "type": "string", "enum": ["pending", "accepted", "rejected", "cancelled"] },
              "reason": { "type": ["string", "null"] },
              "apns_timestamp": { "type": ["integer", "null"], "description": "milliseconds since 1970, for Unregistered" }
            }
          },
          "Notification": {
            "type": "object",
            "properties": {
              "id": { "type": "string" }, "state": { "type": "string" }, "topic": { "type": "string" },
              "environment": { "type": "string" }, "audience": { "type": ["string", "null"] },
              "total": { "type": "integer" }, "accepted": { "type": "integer" }, "rejected": { "type": "integer" },
              "pending": { "type": "integer" }, "resent": { "type": "integer" },
              "devices": { "type": "array", "items": { "$ref": "#/components/schemas/DeviceOutcome" } }
            }
          },
          "Campaign": {
            "type": "object",
            "description": "The fields of `pushfleet status --json`.",
            "properties": {
              "id": { "type": "string" }, "state": { "type": "string" }, "total": { "type": "integer" },
              "accepted": { "type": "integer" }, "rejected": { "type": "object", "additionalProperties": { "type": "integer" } },
              "pending": { "type": "integer" }, "resent": { "type": "integer" }, "rate": { "type": "number" },
              "rate_limit": { "type": ["integer", "null"] },
              "starts_at": { "type": ["string", "null"], "format": "date-time" },
              "eta_seconds": { "type": ["number", "null"] }
            }
          },
          "Device": {
            "type": "object",
            "required": ["topic", "user"],
            "properties": {
              "topic": { "type": "string" },
              "environment": { "type": "string", "enum": ["production", "sandbox"], "default": "production" },
              "user": { "type": "string" },
              "platform": { "type": "string" },
              "locale": { "type": "string", "description": "the phone's locale (fr_FR), for localized campaigns from the registry; absent keeps the one registered before" },
              "time_zone": { "type": "string", "description": "the phone's IANA time zone (Europe/Paris), for local-time campaigns from the registry; absent keeps the one registered before" },
              "registered_at": { "type": "string", "format": "date-time", "description": "Defaults to now." }
            }
          }
        },
        "responses": {
          "BadRequest": { "description": "Bad JSON, a missing or wrong field, a payload over APNs' limit; nothing was changed.", "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Error" } } } },
          "Unauthorized": { "description": "No valid API key; nothing was changed.", "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Error" } } } },
          "Forbidden": { "description": "The key is not for this topic; nothing was changed.", "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Error" } } } },
          "NotFound": { "description": "No such thing.", "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Error" } } } }
        }
      },
      "security": [{ "apiKey": [] }],
      "paths": {
        "/v1/notify": {
          "post": {
            "summary": "Send one notification now to a user's devices, a group's, or some tokens.",
            "requestBody": { "required": true, "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Notify" } } } },
            "responses": {
              "202": { "description": "Taken; its outcomes at href." },
              "200": { "description": "A notification with this id exists; nothing more was sent." },
              "400": { "$ref": "#/components/responses/BadRequest" },
              "401": { "$ref": "#/components/responses/Unauthorized" },
              "403": { "$ref": "#/components/responses/Forbidden" }
            }
          }
        },
        "/v1/notifications/{id}": {
          "get": {
            "summary": "A notification's outcome at each device.",
            "parameters": [{ "name": "id", "in": "path", "required": true, "schema": { "type": "string", "format": "uuid" } }],
            "responses": {
              "200": { "description": "It", "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Notification" } } } },
              "401": { "$ref": "#/components/responses/Unauthorized" },
              "403": { "$ref": "#/components/responses/Forbidden" },
              "404": { "$ref": "#/components/responses/NotFound" }
            }
          }
        },
        "/v1/devices/{token}": {
          "put": {
            "summary": "Register a device to a user: the latest registration owns the phone, and revives it if APNs had given up on it before.",
            "parameters": [{ "name": "token", "in": "path", "required": true, "schema": { "type": "string" } }],
            "requestBody": { "required": true, "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Device" } } } },
            "responses": {
              "200": { "description": "Registered: status, owner, previous_owner." },
              "400": { "$ref": "#/components/responses/BadRequest" },
              "401": { "$ref": "#/components/responses/Unauthorized" },
              "403": { "$ref": "#/components/responses/Forbidden" }
            }
          },
          "delete": {
            "summary": "Remove a device.",
            "parameters": [
              { "name": "token", "in": "path", "required": true, "schema": { "type": "string" } },
              { "name": "topic", "in": "query", "required": true, "schema": { "type": "string" } },
              { "name": "environment", "in": "query", "schema": { "type": "string", "enum": ["production", "sandbox"], "default": "production" } }
            ],
            "responses": {
              "204": { "description": "Removed." },
              "400": { "$ref": "#/components/responses/BadRequest" },
              "401": { "$ref": "#/components/responses/Unauthorized" },
              "403": { "$ref": "#/components/responses/Forbidden" },
              "404": { "$ref": "#/components/responses/NotFound" }
            }
          }
        },
        "/v1/groups/{id}/members": {
          "put": {
            "summary": "Set a group's members exactly (the users sharing a doorbell).",
            "parameters": [{ "name": "id", "in": "path", "required": true, "schema": { "type": "string" } }],
            "requestBody": { "required": true, "content": { "application/json": { "schema": { "type": "object", "required": ["users"], "properties": { "users": { "type": "array", "items": { "type": "string" } } } } } } },
            "responses": {
              "200": { "description": "Set." },
              "400": { "$ref": "#/components/responses/BadRequest" },
              "401": { "$ref": "#/components/responses/Unauthorized" }
            }
          }
        },
        "/v1/campaigns": {
          "post": {
            "summary": "Launch a campaign, as `pushfleet launch` does.",
            "requestBody": { "required": true, "content": { "application/json": { "schema": { "$ref": "#/components/schemas/NewCampaign" } } } },
            "responses": {
              "201": { "description": "Created; its progress at href." },
              "200": { "description": "A campaign with this id exists; nothing changed." },
              "400": { "$ref": "#/components/responses/BadRequest" },
              "401": { "$ref": "#/components/responses/Unauthorized" },
              "403": { "$ref": "#/components/responses/Forbidden" }
            }
          }
        },
        "/v1/campaigns/{id}": {
          "get": {
            "summary": "A campaign's progress, as `pushfleet status --json` prints it.",
            "parameters": [{ "name": "id", "in": "path", "required": true, "schema": { "type": "string", "format": "uuid" } }],
            "responses": {
              "200": { "description": "It", "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Campaign" } } } },
              "401": { "$ref": "#/components/responses/Unauthorized" },
              "403": { "$ref": "#/components/responses/Forbidden" },
              "404": { "$ref": "#/components/responses/NotFound" }
            }
          }
        },
        "/healthz": { "get": { "summary": "The process answers.", "security": [], "responses": { "200": { "description": "ok" } } } },
        "/openapi.json": { "get": { "summary": "This document.", "security": [], "responses": { "200": { "description": "It" } } } }
      }
    }
    """#
}
