// A workbook on the Application Insights component: what OnceGate prevented, what waits for a person,
// and how it answers, read from the app's telemetry events (oncegate/telemetry.py). Its content is
// workbook.json, whose queries tests/infra/test_monitoring.py holds to the events and dimensions the
// app sends; docs/operations.md describes each tile.

@description('Name of the Application Insights component the workbook reads.')
param applicationInsightsName string

@description('Resource ID of the Log Analytics workspace holding the audit logs, which the audit tile reads.')
param logAnalyticsWorkspaceId string

@description('Region of the workbook.')
param location string

@description('Tags of the workbook.')
param tags object

resource applicationInsights 'Microsoft.Insights/components@2020-02-02' existing = {
  name: applicationInsightsName
}

// fallbackResourceIds: the resource the queries run on when the workbook opens from the gallery. The audit
// tile reads the workspace instead (its crossComponentResources), named in workbook.json by a placeholder.
var workspacePlaceholder = '<log-analytics-workspace-id>'
var content = union(json(replace(loadTextContent('workbook.json'), workspacePlaceholder, logAnalyticsWorkspaceId)), {
  fallbackResourceIds: [
    applicationInsights.id
  ]
})

resource workbook 'Microsoft.Insights/workbooks@2023-06-01' = {
  // A workbook's name is a GUID; this one is the same on every redeploy, so a redeploy updates it.
  name: guid(applicationInsights.id, 'oncegate-workbook')
  location: location
  tags: tags
  kind: 'shared'
  properties: {
    displayName: 'OnceGate'
    category: 'workbook'
    sourceId: applicationInsights.id
    serializedData: string(content)
    version: '1.0'
  }
}

@description('Resource ID of the workbook.')
output workbookId string = workbook.id
